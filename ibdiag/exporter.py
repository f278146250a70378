"""``ibdiag serve``: the HTTP endpoint Prometheus scrapes, built to survive hostile clients.

One asyncio event loop (standard library only) does all the socket work, so an idle or slow
client costs a file descriptor and a few kilobytes, never a thread. A scrape's collection
(``make_report`` then ``ibdiag.render.prometheus.render``) runs in a worker thread:

- **Single flight.** One collection at a time. A scrape that arrives while one is running waits
  for that collection and is answered with its result (N concurrent scrapes: 1 collection).
- **Scrape deadline.** A scrape waits at most ``scrape_timeout`` seconds (less when Prometheus
  says, in ``X-Prometheus-Scrape-Timeout-Seconds``, that it gives up sooner: then that value
  minus 0.5 s, as blackbox_exporter does). Past it, the scrape is answered with the last
  complete collection's samples (their ``ibdiag_last_run_timestamp_seconds`` tells how old), or
  none if there was none, plus ``ibdiag_scrape_timeout 1``. A collection blocked in a sysfs read
  cannot be cancelled (a thread blocked in ``read(2)`` cannot be interrupted from Python): it
  keeps its thread, and the scrapes that come while it is blocked attach to it rather than
  start a second one, so at most one collection thread is ever blocked.
- **Latest collection** (``max_age`` > 0). A scrape is answered at once with the last
  collection when it is younger than ``max_age`` seconds - the scrape then costs the HTTP
  answer only - and one past half that age also starts the next collection in the background,
  for the scrape after. An older one (or none) is waited for as above. With Prometheus scraping
  every 15 s and ``max_age`` 30, every scrape but the first is answered at once with what was
  read at the scrape before (``ibdiag_last_run_timestamp_seconds`` says when).
- **Per-connection timeouts.** A request must arrive whole within ``client_timeout`` seconds of
  the connection (a total, so a client that drips one byte at a time gains nothing), and the
  answer must be taken within ``client_timeout`` too; otherwise the connection is dropped.
  A request that was not received whole (the client went away half-way) is never served.
- **Connection cap.** At most ``max_connections`` at once. A connection over the cap closes the
  oldest one that has not finished sending its request (the likeliest to be idle or
  slowloris); when every connection is busy with a complete request, the new one is closed.
- **Quiet.** A client that disconnects, resets or times out is not logged; anything else
  unexpected is one line through ``log``. Never a traceback.

HTTP: ``GET`` and ``HEAD`` of ``/metrics`` and ``/`` (a pointer page), 404 elsewhere, 405 for
other methods, 400 for malformed requests, 431 for request heads over 8 KiB or 100 lines. One
request per connection (``Connection: close``). An HTTP/0.9 request (``GET /metrics`` with no
version) is answered the 0.9 way: the body alone, then close.
"""

from __future__ import annotations

import asyncio
import email.utils
import re
import signal
import socket
import threading
import time
from typing import Callable, Dict, Optional, Tuple

from ibdiag.model import Report
from ibdiag.render.options import RenderOptions
from ibdiag.render.prometheus import CONTENT_TYPE, render, render_scrape_timeout

DEFAULT_LISTEN = "127.0.0.1:9477"
DEFAULT_SCRAPE_TIMEOUT = 10.0
DEFAULT_CLIENT_TIMEOUT = 10.0
DEFAULT_MAX_CONNECTIONS = 64
PROMETHEUS_TIMEOUT_OFFSET = 0.5  # answer this long before Prometheus gives up (blackbox's)
MIN_SCRAPE_DEADLINE = 0.1
MAX_HEAD_BYTES = 8192
MAX_HEADER_LINES = 100

MakeReport = Callable[[], Tuple[Report, float]]
Log = Callable[[str], None]

_PORT = re.compile(r"[0-9]{1,5}")
_VERSION = re.compile(r"HTTP/([0-9])\.([0-9])")
_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    505: "HTTP Version Not Supported",
}
_TEXT = "text/plain; charset=utf-8"
_INDEX = (
    b"<html><head><title>ibdiag</title></head><body><h1>ibdiag</h1>"
    b'<p><a href="/metrics">/metrics</a>: InfiniBand health, re-read on every scrape.</p>'
    b"</body></html>\n"
)


def parse_listen(listen: str) -> Tuple[str, int]:
    """``HOST:PORT`` -> (host, port). ``[v6]:PORT`` for IPv6; an empty HOST is 127.0.0.1.

    ValueError, with a message fit for one line, for anything else: no port, a port that is
    not 1-65535, an IPv6 address without brackets."""
    example = "e.g. 127.0.0.1:9477, 0.0.0.0:9477 or [::1]:9477"
    if listen.startswith("["):
        inner, sep, rest = listen[1:].partition("]")
        if not sep or ":" not in inner:
            raise ValueError(f"wants [IPv6]:PORT, got {listen!r} ({example})")
        if not rest.startswith(":"):
            raise ValueError(f"no port in {listen!r} ({example})")
        host, port = inner, rest[1:]
    else:
        host, sep, port = listen.rpartition(":")
        if not sep:
            raise ValueError(f"wants HOST:PORT, got {listen!r} ({example})")
        if ":" in host:
            raise ValueError(f"put an IPv6 address in brackets: [{host}]:{port} ({example})")
        host = host or "127.0.0.1"
    if not port:
        raise ValueError(f"no port in {listen!r} ({example})")
    if not _PORT.fullmatch(port) or not 1 <= int(port) <= 65535:
        raise ValueError(f"port {port!r} in {listen!r} is not a number from 1 to 65535")
    return host, int(port)


def _bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on (host, port); OSError (socket.gaierror for a bad host)."""
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # restart over TIME_WAIT
        sock.bind(address)
        sock.listen(128)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


class _Outcome:
    """One collection's answer: the rendered body, or why there is none."""

    __slots__ = ("body", "error")

    def __init__(self, body: Optional[bytes], error: Optional[str] = None) -> None:
        self.body = body
        self.error = error


class _Connection:
    __slots__ = ("idle", "transport")

    def __init__(self, transport: asyncio.WriteTransport) -> None:
        self.transport = transport
        self.idle = True  # True until its request has arrived whole


class _BadRequest(Exception):
    def __init__(self, code: int, why: str) -> None:
        super().__init__(why)
        self.code = code


class _Request:
    __slots__ = ("headers", "method", "path", "version")

    def __init__(self, method: str, path: str, version: Tuple[int, int], headers: Dict[str, str]):
        self.method = method
        self.path = path
        self.version = version
        self.headers = headers


_CLIENT_GONE = (
    ConnectionError,
    OSError,
    asyncio.IncompleteReadError,
    asyncio.TimeoutError,
    asyncio.LimitOverrunError,
)


class MetricsServer:
    """The /metrics server, bound to ``listen`` when made (OSError if it cannot be): run it with
    ``serve_forever()`` (in a thread, for tests) and stop it with ``shutdown()`` from another
    thread, then ``server_close()``."""

    def __init__(
        self,
        listen: str,
        make_report: MakeReport,
        compat: Optional[str] = None,
        *,
        scrape_timeout: float = DEFAULT_SCRAPE_TIMEOUT,
        client_timeout: float = DEFAULT_CLIENT_TIMEOUT,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        max_age: float = 0.0,
        log: Optional[Log] = None,
    ) -> None:
        host, port = parse_listen(listen)
        if scrape_timeout <= 0 or client_timeout <= 0 or max_connections < 1 or max_age < 0:
            raise ValueError(
                "timeouts must be positive, max_connections at least 1, max_age not negative"
            )
        self.max_age = max_age
        self.make_report = make_report
        self.compat = compat
        self.scrape_timeout = scrape_timeout
        self.client_timeout = client_timeout
        self.max_connections = max_connections
        self.log: Log = log or (lambda line: None)
        self.socket = _bind(host, port)
        self.server_address = self.socket.getsockname()
        # Counters, for tests and benchmarks (read them from any thread; the loop writes them).
        self.collections = 0  # collections started
        self.scrapes_waiting = 0  # scrapes now waiting for a collection
        self.evicted = 0  # connections closed because of the cap
        self._connections: Dict[_Connection, None] = {}  # insertion order = age
        self._flight: Optional[asyncio.Future] = None
        self._last: Optional[_Outcome] = None  # the last collection that produced a body
        self._last_at = 0.0  # when it landed (time.monotonic())
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._stop: Optional[asyncio.Event] = None
        self._stop_requested = False
        self._running = threading.Event()
        self._finished = threading.Event()
        self._state = threading.Lock()

    @property
    def connections(self) -> int:
        return len(self._connections)

    # --- running and stopping ---------------------------------------------------------------

    def serve_forever(self, handle_signals: bool = False) -> None:
        """Serve until ``shutdown()`` (or, with ``handle_signals`` in the main thread, SIGTERM,
        SIGINT or SIGHUP). Connections still open then are dropped."""
        loop = asyncio.new_event_loop()
        loop.set_exception_handler(self._loop_exception)
        try:
            loop.run_until_complete(self._main(handle_signals))
        finally:
            try:
                _cancel_all(loop)
                loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                loop.close()
                self._finished.set()

    def shutdown(self) -> None:
        """Stop ``serve_forever`` (from another thread) and wait until it has returned."""
        with self._state:
            self._stop_requested = True
            loop, stop = self._loop, self._stop
        if loop is None or stop is None:
            return  # not started: serve_forever will see the request and return at once
        try:
            loop.call_soon_threadsafe(stop.set)
        except RuntimeError:
            return  # the loop is already closed
        self._finished.wait()

    def server_close(self) -> None:
        self.socket.close()

    async def _main(self, handle_signals: bool) -> None:
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        with self._state:
            if self._stop_requested:
                return
            self._loop, self._stop = loop, stop
        if handle_signals:
            for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                loop.add_signal_handler(number, stop.set)
        server = await asyncio.start_server(
            self._handle, sock=self.socket, limit=MAX_HEAD_BYTES, backlog=128
        )
        self._running.set()
        try:
            await stop.wait()
        finally:
            server.close()
            for connection in list(self._connections):
                connection.transport.abort()
            self._connections.clear()
            if handle_signals:
                for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                    loop.remove_signal_handler(number)

    def _loop_exception(self, loop: asyncio.AbstractEventLoop, context: dict) -> None:
        """asyncio's report of an error nobody caught: silent for a client that went away,
        one line otherwise (never asyncio's default traceback)."""
        exc = context.get("exception")
        if isinstance(exc, _CLIENT_GONE):
            return
        what = f"{type(exc).__name__}: {exc}" if exc is not None else ""
        self.log(f"{context.get('message', 'error')}" + (f": {what}" if what else ""))

    # --- one connection ---------------------------------------------------------------------

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        transport = writer.transport
        connection = _Connection(transport)
        self._connections[connection] = None
        try:
            if not self._admit(connection):
                return
            try:
                request = await asyncio.wait_for(_read_request(reader), self.client_timeout)
            except _BadRequest as bad:
                await self._answer(writer, (1, 0), "GET", bad.code, _TEXT, f"{bad}\n".encode())
                return
            if request is None:
                return  # the client went away or sent nothing: nothing to answer
            connection.idle = False
            code, content_type, body = await self._route(request)
            await self._answer(writer, request.version, request.method, code, content_type, body)
        except _CLIENT_GONE:
            pass
        finally:
            self._connections.pop(connection, None)
            transport.abort()

    def _admit(self, connection: _Connection) -> bool:
        """Keep the connection count at the cap: close the oldest connection still waiting for
        its request, or this one when every other is busy."""
        if len(self._connections) <= self.max_connections:
            return True
        victim = next(
            (other for other in self._connections if other.idle and other is not connection),
            connection,
        )
        self._connections.pop(victim, None)
        victim.transport.abort()
        self.evicted += 1
        return victim is not connection

    async def _route(self, request: _Request) -> Tuple[int, str, bytes]:
        if request.method not in ("GET", "HEAD"):
            return 405, _TEXT, b"only GET and HEAD\n"
        path = request.path.split("?", 1)[0]
        if path == "/metrics":
            return await self._scrape(request)
        if path == "/":
            return 200, "text/html; charset=utf-8", _INDEX
        return 404, _TEXT, b"not found\n"

    async def _answer(
        self,
        writer: asyncio.StreamWriter,
        version: Tuple[int, int],
        method: str,
        code: int,
        content_type: str,
        body: bytes,
    ) -> None:
        if writer.transport.is_closing():
            return
        if version == (0, 9):
            data = body  # HTTP/0.9: the body alone
        else:
            head = (
                f"HTTP/1.0 {code} {_REASONS[code]}\r\n"
                "Server: ibdiag\r\n"
                f"Date: {email.utils.formatdate(usegmt=True)}\r\n"
                f"Content-Type: {content_type}\r\n"
                f"Content-Length: {len(body)}\r\n"
                + ("Allow: GET, HEAD\r\n" if code == 405 else "")
                + "Connection: close\r\n\r\n"
            ).encode("ascii")
            data = head if method == "HEAD" else head + body
        # drain() then waits until the kernel has taken every byte, so close loses nothing and
        # a client that does not read is dropped after client_timeout.
        writer.transport.set_write_buffer_limits(high=0)
        writer.write(data)
        await asyncio.wait_for(writer.drain(), self.client_timeout)

    # --- scrapes ----------------------------------------------------------------------------

    def _deadline(self, request: _Request) -> float:
        deadline = self.scrape_timeout
        told = request.headers.get("x-prometheus-scrape-timeout-seconds")
        if told:
            try:
                seconds = float(told)
            except ValueError:
                seconds = 0.0
            if seconds > 0:  # also rules out NaN
                deadline = min(deadline, seconds - PROMETHEUS_TIMEOUT_OFFSET)
        return max(deadline, MIN_SCRAPE_DEADLINE)

    async def _scrape(self, request: _Request) -> Tuple[int, str, bytes]:
        latest = self._latest()
        if latest is not None:
            return 200, CONTENT_TYPE, latest + render_scrape_timeout(False).encode()
        flight = self._flight
        if flight is None:
            flight = self._flight = self._start_collection()
        self.scrapes_waiting += 1
        try:
            outcome: Optional[_Outcome] = await asyncio.wait_for(
                asyncio.shield(flight), self._deadline(request)
            )
            timed_out = False
        except asyncio.TimeoutError:
            outcome, timed_out = self._last, True
        finally:
            self.scrapes_waiting -= 1
        if outcome is not None and outcome.body is None:
            return 500, _TEXT, f"ibdiag: {outcome.error}\n".encode()
        body = outcome.body if outcome is not None and outcome.body is not None else b""
        return 200, CONTENT_TYPE, body + render_scrape_timeout(timed_out).encode()

    def _latest(self) -> Optional[bytes]:
        """The last collection's body when it is younger than ``max_age`` (starting the next
        collection in the background once it is past half that); None: collect and wait."""
        if self.max_age <= 0 or self._last is None or self._last.body is None:
            return None
        age = time.monotonic() - self._last_at
        if age >= self.max_age:
            return None
        if age >= self.max_age / 2 and self._flight is None:
            self._flight = self._start_collection()  # for the next scrape; landed by _landed
        return self._last.body

    def _start_collection(self) -> asyncio.Future:
        loop = asyncio.get_running_loop()
        flight = loop.create_future()
        self.collections += 1
        thread = threading.Thread(
            target=self._collect, args=(loop, flight), name="ibdiag-collect", daemon=True
        )
        thread.start()
        return flight

    def _collect(self, loop: asyncio.AbstractEventLoop, flight: asyncio.Future) -> None:
        """The worker thread: one collection, handed back to the loop. A daemon thread, so a
        collection blocked for good never holds up the process's exit."""
        try:
            report, duration = self.make_report()
            options = RenderOptions(duration_s=duration, compat=self.compat)
            outcome = _Outcome(render(report, options).encode("utf-8"))
        except Exception as exc:  # noqa: BLE001 - a failed collection is a 500, never a crash
            outcome = _Outcome(None, f"{type(exc).__name__}: {exc}")
        try:
            loop.call_soon_threadsafe(self._landed, flight, outcome)
        except RuntimeError:
            pass  # the server stopped while this collection ran

    def _landed(self, flight: asyncio.Future, outcome: _Outcome) -> None:
        if self._flight is flight:
            self._flight = None
        if outcome.body is not None:
            self._last = outcome
            self._last_at = time.monotonic()
        else:
            self.log(f"collection failed: {outcome.error}")
        if not flight.done():
            flight.set_result(outcome)


async def _read_request(reader: asyncio.StreamReader) -> Optional[_Request]:
    """The request line and headers, whole; None if the client sent nothing or went away before
    the blank line that ends the head; _BadRequest for a malformed or oversized head."""
    try:
        line = await reader.readuntil(b"\n")
    except asyncio.IncompleteReadError:
        return None
    except asyncio.LimitOverrunError:
        raise _BadRequest(431, "request line too long") from None
    words = line.decode("latin-1").split()
    if len(words) == 2:  # HTTP/0.9: "GET /path", no headers
        if words[0] != "GET":
            raise _BadRequest(400, "HTTP/0.9 knows only GET")
        return _Request("GET", words[1], (0, 9), {})
    if len(words) != 3:
        raise _BadRequest(400, "malformed request line")
    method, path, version_text = words
    match = _VERSION.fullmatch(version_text)
    if not match:
        raise _BadRequest(400, "malformed HTTP version")
    version = (int(match.group(1)), int(match.group(2)))
    if version[0] != 1:
        raise _BadRequest(505, "only HTTP/1.x")
    headers: Dict[str, str] = {}
    size = len(line)
    for _ in range(MAX_HEADER_LINES):
        try:
            line = await reader.readuntil(b"\n")
        except asyncio.IncompleteReadError:
            return None  # went away half-way: not served
        except asyncio.LimitOverrunError:
            raise _BadRequest(431, "header line too long") from None
        size += len(line)
        if size > MAX_HEAD_BYTES:
            raise _BadRequest(431, "request head over 8 KiB")
        if line in (b"\r\n", b"\n"):
            return _Request(method, path, version, headers)
        name, sep, value = line.decode("latin-1").partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    raise _BadRequest(431, f"over {MAX_HEADER_LINES} header lines")


def _cancel_all(loop: asyncio.AbstractEventLoop) -> None:
    """What asyncio.run does on the way out: cancel the tasks left and let them finish."""
    tasks = [task for task in asyncio.all_tasks(loop) if not task.done()]
    for task in tasks:
        task.cancel()
    if tasks:
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))


def make_server(
    listen: str, make_report: MakeReport, compat: Optional[str] = None, **options
) -> MetricsServer:
    """The server ``serve`` runs, bound but not yet serving (tests run ``serve_forever`` in a
    thread and stop it with ``shutdown``). ``options``: those of ``MetricsServer``."""
    return MetricsServer(listen, make_report, compat, **options)


def serve(listen: str, make_report: MakeReport, compat: Optional[str] = None, **options) -> None:
    """Answer ``GET /metrics`` on ``listen`` until SIGTERM, SIGINT or SIGHUP (main thread)."""
    server = make_server(listen, make_report, compat, **options)
    try:
        server.serve_forever(handle_signals=threading.current_thread() is threading.main_thread())
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
