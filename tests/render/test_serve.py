"""``ibdiag.exporter``: the /metrics server under hostile clients, with real sockets on loopback.

Each test runs a ``MetricsServer`` in a thread with short timeouts and a ``make_report`` it
controls (counting collections, or blocking on an Event like a hung sysfs read), and talks to it
over raw sockets. No assertion depends on how fast the machine is: where a test waits, it waits
for a condition with a generous bound, and the bound only turns a hang into a failure.
"""

from __future__ import annotations

import re
import socket
import threading
import time
from pathlib import Path
from typing import Callable, List, Optional, Tuple

import pytest
from loopback import raw_request, serve_in_thread
from prometheus_text import parse, promtool_check
from snapshots import loaded_registry
from sysfs_builder import mlx5_node, write_node

from ibdiag import exporter
from ibdiag.collect import collect
from ibdiag.grade import grade
from ibdiag.render import prometheus
from ibdiag.thresholds import Thresholds

WAIT_S = 30  # the most any condition below is waited for; a hang becomes a failure after it
STAMP = "ibdiag_last_run_timestamp_seconds"
TIMEOUT_SAMPLE = "ibdiag_scrape_timeout"


class Node:
    """A generated sysfs tree and a make_report over it that counts its collections and, while
    ``gate`` is clear, blocks before reading (as a sysfs read that never returns would)."""

    def __init__(self, tmp_path: Path, hcas: int = 2) -> None:
        self.sys_root = str(tmp_path / "sys")
        write_node(self.sys_root, mlx5_node(hcas))
        self.calls = 0
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Event()  # set when a collection starts
        self.fail: Optional[Exception] = None

    def make_report(self):
        self.calls += 1
        self.entered.set()
        if not self.gate.wait(WAIT_S * 2):
            raise RuntimeError("the test never opened the gate")
        if self.fail is not None:
            raise self.fail
        start = time.monotonic()
        snapshot = collect(self.sys_root, "/nonexistent-proc", {"sysfs"})
        report = grade(snapshot, loaded_registry(), Thresholds(), "quick")
        return report, time.monotonic() - start


class Running:
    def __init__(self, node: Node, **options) -> None:
        self.node = node
        self.log: List[str] = []
        self.server, self.thread, self.port = serve_in_thread(
            node.make_report, log=self.log.append, **options
        )

    def get(self, request: bytes = b"GET /metrics HTTP/1.0\r\n\r\n", timeout: float = WAIT_S):
        return raw_request(self.port, request, timeout)

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=WAIT_S)
        assert not self.thread.is_alive(), "serve_forever did not return after shutdown"


@pytest.fixture
def serving(tmp_path: Path):
    started: List[Running] = []

    def start(node: Optional[Node] = None, **options) -> Tuple[Running, Node]:
        node = node or Node(tmp_path)
        running = Running(node, **options)
        started.append(running)
        return running, node

    yield start
    for running in started:
        running.node.gate.set()
        running.stop()


def wait_until(what: str, condition: Callable[[], bool]) -> None:
    end = time.monotonic() + WAIT_S
    while time.monotonic() < end:
        if condition():
            return
        time.sleep(0.02)
    pytest.fail(f"not within {WAIT_S} s: {what}")


def split(answer: bytes) -> Tuple[int, dict, str]:
    head, sep, body = answer.partition(b"\r\n\r\n")
    assert sep, f"no HTTP head in {answer[:200]!r}"
    lines = head.decode("latin-1").split("\r\n")
    code = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:])}
    return code, headers, body.decode()


def metrics(answer: bytes) -> dict:
    code, headers, body = split(answer)
    assert code == 200, body
    assert headers["content-type"] == prometheus.CONTENT_TYPE
    assert int(headers["content-length"]) == len(body.encode())
    return parse(body)


def sample(samples: dict, name: str) -> Optional[float]:
    return samples.get((name, ()))


# --- --listen --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "listen, expected",
    [
        ("127.0.0.1:9477", ("127.0.0.1", 9477)),
        ("0.0.0.0:1", ("0.0.0.0", 1)),  # noqa: S104 - parsed, never bound
        (":9477", ("127.0.0.1", 9477)),
        ("localhost:65535", ("localhost", 65535)),
        ("[::1]:9477", ("::1", 9477)),
        ("[::]:9477", ("::", 9477)),
    ],
)
def test_parse_listen_accepts_host_port(listen, expected) -> None:
    assert exporter.parse_listen(listen) == expected


@pytest.mark.parametrize(
    "listen",
    ["abc", "", ":99999", "127.0.0.1:", "127.0.0.1:0", "[::1]", "[::1]:", "::1", "::1:9477",
     "[abc]:80", "host:+80", "host: 80", "host:9477x", "host:\u0663", "[::1]9477"],
)  # fmt: skip
def test_parse_listen_refuses_what_is_not_host_port(listen) -> None:
    with pytest.raises(ValueError) as error:
        exporter.parse_listen(listen)
    assert "\n" not in str(error.value)


# --- the answers -----------------------------------------------------------------------------


def test_metrics_index_404_405_head_and_bad_requests(serving) -> None:
    running, _ = serving()
    samples = metrics(running.get())
    assert sample(samples, "ibdiag_verdict") is not None
    assert sample(samples, TIMEOUT_SAMPLE) == 0
    code, _, body = split(running.get(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
    assert code == 200 and "/metrics" in body
    assert split(running.get(b"GET /nothing HTTP/1.0\r\n\r\n"))[0] == 404
    code, headers, _ = split(running.get(b"POST /metrics HTTP/1.0\r\nContent-Length: 0\r\n\r\n"))
    assert code == 405 and headers["allow"] == "GET, HEAD"
    code, headers, body = split(running.get(b"HEAD /metrics HTTP/1.0\r\n\r\n"))
    assert code == 200 and body == "" and int(headers["content-length"]) > 1000
    assert split(running.get(b"GET\r\n\r\n"))[0] == 400
    assert split(running.get(b"GET /metrics HTTP/2.0\r\n\r\n"))[0] == 505
    assert split(running.get(b"GET /metrics HTTP/1.0\r\n" + b"X: y\r\n" * 2000 + b"\r\n"))[0] == 431
    assert split(running.get(b"GET /" + b"a" * 10000 + b" HTTP/1.0\r\n\r\n"))[0] == 431
    assert running.log == []


def test_http_0_9_request_is_answered_with_the_body_alone(serving) -> None:
    running, _ = serving()
    answer = running.get(b"GET /metrics\r\n").decode()
    assert not answer.startswith("HTTP/")
    samples = parse(answer)
    assert sample(samples, "ibdiag_verdict") is not None
    assert split(running.get(b"PUT /metrics\r\n"))[0] == 400


# --- hostile clients -------------------------------------------------------------------------


def test_half_sent_request_then_disconnect_is_not_served(serving) -> None:
    running, node = serving()
    for _ in range(20):
        with socket.create_connection(("127.0.0.1", running.port)) as sock:
            sock.sendall(b"GET /metrics HTTP/1.0\r\nHost: x\r\n")  # no blank line: not whole
    with socket.create_connection(("127.0.0.1", running.port)) as sock:
        sock.sendall(b"GET /metrics HTTP/1.0\r\nHost: x\r\n")
        sock.shutdown(socket.SHUT_WR)  # half-closed: the server sees EOF before the head ends
        assert sock.recv(100) == b""
    metrics(running.get())  # and the server still answers
    assert node.calls == 1, "a request that never arrived whole was served"
    assert running.log == []


def test_idle_connection_is_dropped_after_client_timeout(serving) -> None:
    running, node = serving(client_timeout=0.5)
    with socket.create_connection(("127.0.0.1", running.port)) as sock:
        sock.settimeout(WAIT_S)
        assert sock.recv(100) == b"", "an idle connection was answered"
    wait_until("the dropped connection is forgotten", lambda: running.server.connections == 0)
    assert node.calls == 0


def test_dripping_client_is_dropped_even_though_it_keeps_sending(serving) -> None:
    """The read timeout is a total for the request, not per byte (slowloris)."""
    running, node = serving(client_timeout=1)
    dropped = False
    with socket.create_connection(("127.0.0.1", running.port)) as sock:
        sock.sendall(b"GET /metrics HTTP/1.0\r\n")
        end = time.monotonic() + WAIT_S
        while time.monotonic() < end and not dropped:
            try:
                sock.sendall(b"X: y\r\n")  # a header line every 0.1 s, never the blank line
            except OSError:
                dropped = True
                break
            sock.settimeout(0.1)
            try:
                dropped = sock.recv(100) == b""
            except socket.timeout:
                pass
            except OSError:
                dropped = True
    assert dropped, f"a client dripping headers for {WAIT_S} s was never dropped"
    assert node.calls == 0


def test_client_that_does_not_read_its_answer_is_dropped(serving, monkeypatch) -> None:
    # An answer far larger than the kernel's socket buffers (tcp_wmem allows 4 MiB), so most of
    # it waits in the server for a client that never reads.
    monkeypatch.setattr(exporter, "render", lambda report, options: "#" * (32 << 20))
    running, _ = serving(client_timeout=1)
    size = 32 << 20
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a tiny window: the rest waits
    sock.connect(("127.0.0.1", running.port))
    try:
        sock.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
        wait_until("the server drops the connection", lambda: running.server.connections == 0)
        received = b""
        sock.settimeout(WAIT_S)
        try:
            while True:
                chunk = sock.recv(1 << 16)
                if not chunk:
                    break
                received += chunk
        except ConnectionResetError:
            pass
        assert len(received) < size, "the whole answer was still delivered"
    finally:
        sock.close()
    assert running.log == []


def test_connection_cap_keeps_threads_and_connections_bounded(serving) -> None:
    running, _ = serving(max_connections=8, client_timeout=WAIT_S * 2)
    threads_before = threading.active_count()
    idle = []
    try:
        for _ in range(200):
            idle.append(socket.create_connection(("127.0.0.1", running.port)))
        idle[-1].sendall(b"GET /metr")  # some of them half-way through a request
        wait_until("the cap is applied", lambda: running.server.evicted >= 200 - 8)
        assert running.server.connections <= 8
        # The scrape evicts the oldest idle connection rather than being refused.
        samples = metrics(running.get())
        assert sample(samples, "ibdiag_verdict") is not None
        assert threading.active_count() <= threads_before + 1  # + at most a collection thread
    finally:
        for sock in idle:
            sock.close()
    wait_until("closed connections are forgotten", lambda: running.server.connections == 0)
    assert running.log == []


# --- collections: single flight and the deadline ---------------------------------------------


def test_concurrent_scrapes_share_one_collection(serving) -> None:
    running, node = serving(scrape_timeout=WAIT_S * 2)
    node.gate.clear()
    answers: List[bytes] = []

    def scrape():
        answers.append(running.get(timeout=WAIT_S * 3))

    clients = [threading.Thread(target=scrape) for _ in range(8)]
    for client in clients:
        client.start()
    wait_until("all 8 scrapes wait", lambda: running.server.scrapes_waiting == 8)
    node.gate.set()
    for client in clients:
        client.join(WAIT_S * 3)
    assert node.calls == 1, f"{node.calls} collections for 8 concurrent scrapes"
    stamps = {sample(metrics(answer), STAMP) for answer in answers}
    assert len(answers) == 8 and len(stamps) == 1
    assert {sample(metrics(answer), TIMEOUT_SAMPLE) for answer in answers} == {0}
    # The flight is over: the next scrape collects afresh.
    assert sample(metrics(running.get()), STAMP) > stamps.pop()
    assert node.calls == 2


def test_hung_collection_answers_at_the_deadline_and_is_not_doubled(serving) -> None:
    running, node = serving(scrape_timeout=0.5)
    first = metrics(running.get())
    assert sample(first, TIMEOUT_SAMPLE) == 0 and node.calls == 1

    node.gate.clear()  # the next collection blocks, like a read(2) that never returns
    node.entered.clear()
    answer = running.get()
    _, _, text = split(answer)
    promtool_check(text)
    stale = metrics(answer)
    assert sample(stale, TIMEOUT_SAMPLE) == 1
    assert sample(stale, STAMP) == sample(first, STAMP), "not the last complete collection"
    assert sample(stale, "ibdiag_verdict") == sample(first, "ibdiag_verdict")
    assert node.entered.is_set() and node.calls == 2

    for _ in range(3):  # the collection is still blocked: no scrape starts another
        assert sample(metrics(running.get()), TIMEOUT_SAMPLE) == 1
    assert node.calls == 2 and running.server.collections == 2

    node.gate.set()  # the read returns: the blocked collection lands
    wait_until("the blocked collection lands", lambda: running.server._flight is None)
    fresh = metrics(running.get())
    assert sample(fresh, TIMEOUT_SAMPLE) == 0 and sample(fresh, STAMP) > sample(first, STAMP)
    assert node.calls == 3
    assert running.log == []


def test_hung_first_collection_answers_only_the_timeout_sample(serving) -> None:
    running, node = serving(scrape_timeout=0.3)
    node.gate.clear()
    answer = running.get()
    _, _, text = split(answer)
    promtool_check(text)
    assert metrics(answer) == {(TIMEOUT_SAMPLE, ()): 1.0}
    node.gate.set()


def test_prometheus_scrape_timeout_header_shortens_the_deadline(serving) -> None:
    running, node = serving(scrape_timeout=WAIT_S * 10)
    node.gate.clear()
    started = time.monotonic()
    answer = running.get(
        b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Prometheus-Scrape-Timeout-Seconds: 1\r\n\r\n",
        timeout=WAIT_S,
    )
    assert sample(metrics(answer), TIMEOUT_SAMPLE) == 1
    assert time.monotonic() - started < WAIT_S * 10  # answered long before --scrape-timeout
    node.gate.set()


def test_failed_collection_is_a_500_and_one_log_line(serving) -> None:
    running, node = serving()
    node.fail = OSError("sysfs went away")
    code, _, body = split(running.get())
    assert code == 500 and body == "ibdiag: OSError: sysfs went away\n"
    assert running.log == ["collection failed: OSError: sysfs went away"]
    node.fail = None
    assert sample(metrics(running.get()), TIMEOUT_SAMPLE) == 0


def test_shutdown_returns_while_a_collection_is_blocked(serving, tmp_path: Path) -> None:
    node = Node(tmp_path)
    running = Running(node, scrape_timeout=0.2)
    node.gate.clear()
    assert sample(metrics(running.get()), TIMEOUT_SAMPLE) == 1
    running.stop()  # joins serve_forever; the blocked collection thread is left (a daemon)
    node.gate.set()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", running.port), timeout=5).close()


def test_exposition_with_the_timeout_sample_is_promtool_clean(tmp_path: Path) -> None:
    text = prometheus.render_scrape_timeout(True)
    assert re.fullmatch(
        r"# HELP ibdiag_scrape_timeout .+\n# TYPE ibdiag_scrape_timeout gauge\n"
        r"ibdiag_scrape_timeout 1\n",
        text,
    )
    promtool_check(text)


# -- --max-age: answered at once from the last collection while it is young ---------------------


def stamp_of(body: str) -> float:
    line = next(line for line in body.splitlines() if line.startswith(STAMP + " "))
    return float(line.split()[1])


def test_a_young_collection_answers_at_once_and_an_old_one_is_refreshed_behind(serving):
    running, node = serving(max_age=1.2)
    code, _, first = split(running.get())
    assert code == 200 and node.calls == 1  # nothing yet: collected and waited for
    node.gate.clear()  # from now on a collection blocks: a scrape that waited would hang
    started = time.monotonic()
    code, _, again = split(running.get())
    assert code == 200 and time.monotonic() - started < 0.5
    assert node.calls == 1 and stamp_of(again) == stamp_of(first)  # young: no collection
    time.sleep(0.7)  # past half the age: answered at once, the next collection started behind
    code, _, behind = split(running.get())
    assert code == 200 and stamp_of(behind) == stamp_of(first)
    wait_until("the background collection to start", lambda: node.calls == 2)
    node.gate.set()
    wait_until(
        "a scrape to get the background collection",
        lambda: stamp_of(split(running.get())[2]) > stamp_of(first),
    )
    assert node.calls == 2  # that one collection: the scrapes meanwhile were answered at once


def test_past_the_age_a_scrape_waits_for_a_new_collection(serving):
    running, node = serving(max_age=0.3)
    split(running.get())
    time.sleep(0.4)
    split(running.get())
    assert node.calls == 2  # too old to answer with: collected again, waited for


def test_no_max_age_collects_every_scrape(serving):
    running, node = serving()
    for _ in range(3):
        split(running.get())
    assert node.calls == 3


def test_a_negative_max_age_is_refused():
    with pytest.raises(ValueError, match="max_age"):
        exporter.make_server("127.0.0.1:1", lambda: None, max_age=-1)
