"""Level full: ib_write_bw loopback end to end, with stub executables printing real captures.

The stub ``ib_write_bw`` acts as perftest does: without a host argument it is the server
(waits, then ends), with ``localhost`` it is the client and prints a recorded run - by default
the superbench HDR loopback (24056.72 MB/s, perftest's MB being 2^20 bytes: 201.8 Gb/s), or
a per-device, per-attempt override (OCI's 98.01 Gb/s run: half a 200 Gb/s port), or a
failure.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import stubs as S
from full_level_node import HALF_RATE, full_check, full_level_node, stub_ib_write_bw
from sysfs_builder import mlx5_node, write_node, write_nvidia_gpus

from ibdiag import bandwidth, families, migrate
from ibdiag.families.loopback import traffic
from ibdiag.thresholds import Thresholds

TOPO_RAIL = S.fixture("nvidia_smi_topo", "sglang-issue30401-8xH100-8xmlx5-PIX-rail.txt")
TOPO_DGX = S.fixture("nvidia_smi_topo", "dgx-a100-10nic-pxb-pairs-kernel5.4.txt")


@pytest.fixture
def node(tmp_path, monkeypatch):
    return full_level_node(tmp_path, monkeypatch)


def test_healthy_ports_pass_each_with_its_own_server_and_tcp_port(run_cli, node):
    _, results, report = full_check(run_cli, node)
    bandwidth = {r["target"]: r for r in results["perftest.bandwidth"]}
    assert set(bandwidth) == {"mlx5_0:1", "mlx5_1:1"}
    for result in bandwidth.values():
        assert result["status"] == "pass", result
        assert result["observed"] == pytest.approx(201.80, abs=0.01)
        assert result["expected"] == 180.0  # 90% of 200 Gb/s
        assert "201.8 Gb/s >= 180 (90% of the 200 Gb/s link rate)" in result["message"]
    calls = [call for call in node["bin"].calls() if call.startswith("ib_write_bw")]
    servers = sorted(call for call in calls if not call.endswith("localhost"))
    clients = sorted(call for call in calls if call.endswith("localhost"))
    assert servers == [
        "ib_write_bw -d mlx5_0 -i 1 -p 18515 --report_gbits -s 65536 -D 1 -q 1 -F",
        "ib_write_bw -d mlx5_1 -i 1 -p 18516 --report_gbits -s 65536 -D 1 -q 1 -F",
    ]
    assert clients == [server + " localhost" for server in servers]
    assert report["level"] == "full"


def test_a_slow_port_is_retried_once_and_passes_when_the_retry_is_fast(run_cli, node):
    Path(node["state"], "mlx5_1.1.out").write_text(Path(HALF_RATE).read_text())
    _, results, _ = full_check(run_cli, node)
    slow = next(r for r in results["perftest.bandwidth"] if r["target"] == "mlx5_1:1")
    assert slow["status"] == "pass"
    assert "runs: 98.0; 201.8 Gb/s" in slow["message"]
    retry = [c for c in node["bin"].calls() if c.startswith("ib_write_bw -d mlx5_1 -i 1 -p 18616")]
    assert len(retry) == 2  # server and client, on base + 1 + RETRY_PORT_OFFSET
    fast = next(r for r in results["perftest.bandwidth"] if r["target"] == "mlx5_0:1")
    assert "runs:" not in fast["message"]  # not retried


def test_a_port_at_half_its_bandwidth_twice_fails_and_drains(run_cli, node):
    Path(node["state"], "mlx5_0.out").write_text(Path(HALF_RATE).read_text())  # every run
    code, results, _ = full_check(run_cli, node)
    assert code == 2
    slow = next(r for r in results["perftest.bandwidth"] if r["target"] == "mlx5_0:1")
    assert slow["status"] == "fail"
    assert slow["message"].startswith("98.0 Gb/s < 180 (90% of the 200 Gb/s link rate)")
    assert "runs: 98.0; 98.0 Gb/s" in slow["message"]
    reason = run_cli(
        "check", "--level", "full", "--sysfs", node["sys"], "--reason",
        "--config", str(node["tmp"] / "ibdiag.toml"),
    )  # fmt: skip
    assert reason.stdout.strip() == "ibdiag: mlx5_0:1 perftest.bandwidth"


def test_the_profile_floor_wins_over_the_link_rate(run_cli, node):
    (node["tmp"] / "ibdiag.toml").write_text("perftest_duration_s = 1\nperftest_floor_gbps = 205\n")
    _, results, _ = full_check(run_cli, node)
    for result in results["perftest.bandwidth"]:
        assert result["status"] == "fail"
        assert "201.8 Gb/s < 205 (perftest_floor_gbps 205 Gb/s)" in result["message"]


def test_a_client_that_cannot_connect_fails_with_perftests_own_words(run_cli, node):
    for attempt in (1, 2):
        Path(node["state"], f"mlx5_1.{attempt}.sh").write_text(
            "echo ' Couldn'\"'\"'t connect to localhost:18516'\necho ' Unable to open file "
            "descriptor for socket connection Unable to init the socket connection' >&2\nexit 1\n"
        )
    _, results, _ = full_check(run_cli, node)
    failed = next(r for r in results["perftest.bandwidth"] if r["target"] == "mlx5_1:1")
    assert failed["status"] == "fail"
    assert "gave no bandwidth in 2 run(s)" in failed["message"]
    assert "connect" in failed["message"]


def test_pairs_cross_from_each_hca_to_its_partner(run_cli, node):
    (node["tmp"] / "ibdiag.toml").write_text(
        'perftest_duration_s = 1\nperftest_pairing = "pairs"\n'
    )
    _, results, _ = full_check(run_cli, node)
    messages = {r["target"]: r["message"] for r in results["perftest.bandwidth"]}
    assert " to mlx5_1:1" in messages["mlx5_0:1"]
    assert " to mlx5_0:1" in messages["mlx5_1:1"]
    calls = node["bin"].calls()
    assert "ib_write_bw -d mlx5_1 -i 1 -p 18515 --report_gbits -s 65536 -D 1 -q 1 -F" in calls
    assert (
        "ib_write_bw -d mlx5_0 -i 1 -p 18515 --report_gbits -s 65536 -D 1 -q 1 -F localhost"
        in calls
    )


def test_every_loopback_run_records_the_role_it_was_planned_for(run_cli, node):
    (node["tmp"] / "ibdiag.toml").write_text(
        'perftest_duration_s = 1\nperftest_pairing = "pairs"\n'
    )
    Path(node["state"], "mlx5_1.1.out").write_text(Path(HALF_RATE).read_text())  # one retry
    _, _, report = full_check(run_cli, node)
    roles = {
        key: " ".join(run["argv"]).replace(" --report_gbits -s 65536 -D 1 -q 1 -F", "")
        for key, run in report["snapshot"]["commands"].items()
        if run["argv"][0] == "ib_write_bw"
    }
    assert all(run["role"] == key for key, run in report["snapshot"]["commands"].items())
    assert roles == {
        "loopback client mlx5_0:1 attempt 1": "ib_write_bw -d mlx5_0 -i 1 -p 18515 localhost",
        "loopback server mlx5_1:1 for mlx5_0:1 attempt 1": "ib_write_bw -d mlx5_1 -i 1 -p 18515",
        "loopback client mlx5_1:1 attempt 1": "ib_write_bw -d mlx5_1 -i 1 -p 18516 localhost",
        "loopback server mlx5_0:1 for mlx5_1:1 attempt 1": "ib_write_bw -d mlx5_0 -i 1 -p 18516",
        "loopback client mlx5_1:1 attempt 2": "ib_write_bw -d mlx5_1 -i 1 -p 18616 localhost",
        "loopback server mlx5_0:1 for mlx5_1:1 attempt 2": "ib_write_bw -d mlx5_0 -i 1 -p 18616",
    }


def test_each_side_is_pinned_to_its_hcas_numa_node(run_cli, node):
    stubs = S._q(node["bin"].path)  # the stub's own PATH is the system's: run our stub
    node["bin"].add(
        "numactl",
        f'while [ "${{1#--}}" != "$1" ]; do shift; done\ntool="$1"; shift\n'
        f'exec {stubs}/"$tool" "$@"\n',
    )
    full_check(run_cli, node)
    pinned = [c for c in node["bin"].calls() if c.startswith("numactl")]
    assert len(pinned) == 4
    assert all(c.startswith("numactl --cpunodebind=0 --membind=0 ib_write_bw") for c in pinned)


def test_gpudirect_uses_the_gpu_on_each_hcas_pcie_switch(run_cli, node):
    write_nvidia_gpus(node["sys"], 8)
    node["bin"].add("nvidia-smi", S.prints(TOPO_RAIL))
    (node["tmp"] / "ibdiag.toml").write_text("perftest_duration_s = 1\nperftest_gdr = true\n")
    _, results, _ = full_check(run_cli, node)
    clients = [c for c in node["bin"].calls() if c.endswith("localhost")]
    assert any("-d mlx5_0 " in c and "--use_cuda=0" in c for c in clients), clients
    assert any("-d mlx5_1 " in c and "--use_cuda=1" in c for c in clients), clients
    assert "GPU 0 (GPUDirect RDMA)" in results["perftest.bandwidth"][0]["message"]


def test_no_ib_write_bw_installed_is_a_skip(run_cli, node):
    (node["bin"].bin / "ib_write_bw").unlink()
    _, results, _ = full_check(run_cli, node)
    assert {r["status"] for r in results["perftest.bandwidth"]} == {"skip"}
    assert "perftest" in results["perftest.bandwidth"][0]["message"]


def test_a_hung_client_and_server_are_killed_within_their_limit(run_cli, node, monkeypatch):
    monkeypatch.setattr(bandwidth, "STARTUP_ALLOWANCE_S", 1.0)
    mark = S.marker()
    node["bin"].add("ib_write_bw", S.hangs(mark))
    _, results, _ = full_check(run_cli, node)
    for result in results["perftest.bandwidth"]:
        assert result["status"] == "fail"
        assert "timed out" in result["message"]
    assert S.processes_with(mark) == []


def test_levels_below_full_move_no_traffic(run_cli, node):
    for level in ("quick", "standard"):
        run_cli("check", "--level", level, "--sysfs", node["sys"])
    assert not [c for c in node["bin"].calls() if c.startswith("ib_write_bw")]


NUMACTL_0 = ("numactl", "--cpunodebind=0", "--membind=0")


def test_read_loopback_argv_reads_back_what_plan_built():
    argv = ["numactl", "--cpunodebind=1", "--membind=1", "ib_write_bw", "-d", "mlx5_3", "-i", "2",
            "-p", "18600", "--report_gbits", "-s", "65536", "-D", "5", "-q", "1", "-F",
            "--use_cuda=5", "localhost"]  # fmt: skip
    info = migrate.read_loopback_argv(argv)
    assert info == migrate.RecordedLoopback("client", "mlx5_3", 2, 18600, 5)
    assert migrate.read_loopback_argv(["perfquery", "-x"]) is None
    assert migrate.read_loopback_argv(["ib_write_bw", "-d", "mlx5_0"]) is None  # no -p
    test = traffic.LoopbackTest("mlx5_0", 1, "mlx5_1", 1, 18515, gpu=0, server_gpu=1,
                               client_pin=NUMACTL_0)  # fmt: skip
    th = Thresholds()
    assert migrate.read_loopback_argv(test.argv(th, "client")) == migrate.RecordedLoopback(
        "client", "mlx5_0", 1, 18515, 0
    )
    assert migrate.read_loopback_argv(test.argv(th, "server")) == migrate.RecordedLoopback(
        "server", "mlx5_1", 1, 18515, 1
    )


def _old_bundle_argvs():
    """What a pairs run with one retry recorded before roles: (argv, the role it had)."""
    th = Thresholds()
    first = traffic.LoopbackTest("mlx5_0", 1, "mlx5_1", 1, 18515, gpu=0, server_gpu=1,
                                client_pin=NUMACTL_0)  # fmt: skip
    second = traffic.LoopbackTest("mlx5_1", 1, "mlx5_0", 1, 18516)
    retry = traffic.LoopbackTest("mlx5_1", 1, "mlx5_0", 1, 18616, attempt=2)
    recorded = [(test.argv(th, side), test.role(side)) for test in (retry, second, first)
                for side in ("server", "client")]  # fmt: skip
    return [*recorded, (["perfquery", "-x", "-C", "mlx5_0", "-P", "1"], None)]


def test_a_bundle_from_before_roles_gets_its_loopback_roles_back():
    """Read together as the perftest check read them before roles: a server and its client
    share a TCP port; a port's attempts go in TCP port order; pinning prefixes are skipped;
    each side's --use_cuda GPU goes into its role, as today's plan puts it there."""
    from ibdiag.model import command_key

    recorded = _old_bundle_argvs()
    argvs = [argv for argv, _ in recorded]
    assert migrate.loopback_roles_before_roles(argvs) == {
        command_key(argv): role for argv, role in recorded if role is not None
    }
    lone_server = ["ib_write_bw", "-d", "mlx5_0", "-i", "1", "-p", "18999"]
    found = migrate.loopback_roles_before_roles([*argvs, lone_server])
    assert command_key(lone_server) not in found
    # and through the one entry point bundles and saved snapshots use
    from datetime import datetime, timezone

    from ibdiag.model import CommandRun, Snapshot

    runs = {command_key(argv): CommandRun(argv=argv, rc=0) for argv in [*argvs, lone_server]}
    old = Snapshot(
        schema_version=1, tool_version="0.0-old", sysfs_root="/sys", procfs_root="/proc",
        collected_at=datetime(2026, 1, 1, tzinfo=timezone.utc), sources=["sysfs", "perftest"],
        commands=runs,
    )  # fmt: skip
    restored = migrate.upgrade(old).commands.values()
    assert sorted((" ".join(run.argv), str(run.role)) for run in restored) == sorted(
        [*((" ".join(argv), str(role)) for argv, role in recorded), (" ".join(lone_server), "None")]
    )


def test_a_bundle_replays_the_typed_loopback_and_gpu_topology_of_the_live_run(run_cli, node):
    """Pairs, a retry, GPUDirect RDMA: the bundle's report.json (the live Snapshot) and its
    replay by `ibdiag report` hold the same typed fields, parsed by the same interpreters."""
    write_nvidia_gpus(node["sys"], 8)
    node["bin"].add("nvidia-smi", S.prints(TOPO_RAIL))
    Path(node["state"], "mlx5_1.1.out").write_text(Path(HALF_RATE).read_text())
    config = node["tmp"] / "ibdiag.toml"
    config.write_text('perftest_duration_s = 1\nperftest_gdr = true\nperftest_pairing = "pairs"\n')
    out = node["tmp"] / "out"
    made = run_cli("collect", "--level", "full", "--sysfs", node["sys"], "--config", str(config),
                   "-o", str(out))  # fmt: skip
    assert made.exit_code == 0, made.stderr
    (bundle,) = out.iterdir()
    live = json.loads((bundle / "report.json").read_text())["snapshot"]
    replayed = json.loads(run_cli("report", str(bundle), "--json").stdout)["snapshot"]
    assert [(a["client_device"], a["server_device"], a["attempt"], a["gpu"], a["server_gpu"])
            for a in live["loopback"]] == [
        ("mlx5_0", "mlx5_1", 1, 0, 1), ("mlx5_1", "mlx5_0", 1, 1, 0), ("mlx5_1", "mlx5_0", 2, 1, 0),
    ]  # fmt: skip
    assert [round(a["gbps"], 1) for a in live["loopback"]] == [201.8, 98.0, 201.8]
    assert live["gpu_topology"]["rails"][:2] == [
        {"gpu": "GPU0", "nic": "mlx5_0", "link": "PIX"},
        {"gpu": "GPU1", "nic": "mlx5_1", "link": "PIX"},
    ]
    assert replayed["loopback"] == live["loopback"]
    assert replayed["gpu_topology"] == live["gpu_topology"]


def test_garbage_or_a_crash_from_ib_write_bw_fails_without_a_traceback(run_cli, node):
    Path(node["state"], "mlx5_0.1.sh").write_text("head -c 300 /dev/urandom\nexit 0\n")
    Path(node["state"], "mlx5_0.2.sh").write_text("kill -SEGV $$\n")
    code, results, _ = full_check(run_cli, node)
    failed = next(r for r in results["perftest.bandwidth"] if r["target"] == "mlx5_0:1")
    assert failed["status"] == "fail"
    assert "gave no bandwidth in 2 run(s)" in failed["message"]
    assert "-11" in failed["message"] or "signal" in failed["message"].lower(), failed
    assert code == 2


def test_sigterm_during_the_traffic_phase_kills_every_server_and_client(node):
    """Slurm or a user stops a long full run: ibdiag ends at once and leaves no perftest."""
    import signal
    import subprocess
    import sys
    import time

    mark = S.marker()
    node["bin"].add("ib_write_bw", S.hangs(mark))
    config = node["tmp"] / "ibdiag.toml"
    config.write_text("perftest_duration_s = 60\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "ibdiag", "check", "--level", "full", "--sysfs", node["sys"],
         "--config", str(config)],
        env=node["bin"].env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    deadline = time.monotonic() + 20
    while len(S.processes_with(mark)) < 4 and time.monotonic() < deadline:
        time.sleep(0.1)  # both HCAs' servers and clients (each a sh and its sleep) are up
    assert S.processes_with(mark), "the tests never started"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=15)
    assert proc.returncode == 3, err
    assert b"interrupted" in err
    time.sleep(0.2)
    assert S.processes_with(mark) == []


def test_gpudirect_gives_each_hca_its_own_gpu_when_two_share_a_switch(
    run_cli, tmp_path, monkeypatch
):
    """DGX A100: mlx5_0 and mlx5_1 are both PXB to GPU0 and GPU1; two loopbacks on one GPU
    would halve both, so the rail pairing (GPU n with mlx5_n) is used, not 'nearest'."""
    sys_root = tmp_path / "sys"
    write_node(str(sys_root), mlx5_node(8))
    write_nvidia_gpus(str(sys_root), 8)
    bin_dir = S.StubBin(tmp_path / "bin")
    state = tmp_path / "perftest"
    state.mkdir()
    bin_dir.add("ib_write_bw", stub_ib_write_bw(state))
    bin_dir.add("nvidia-smi", S.prints(TOPO_DGX))
    monkeypatch.setenv("PATH", bin_dir.path)
    config = tmp_path / "ibdiag.toml"
    config.write_text("perftest_duration_s = 1\nperftest_gdr = true\n")
    run_cli("check", "--level", "full", "--sysfs", str(sys_root), "--config", str(config))
    gpus = {}
    for call in bin_dir.calls():
        if call.endswith("localhost"):
            words = call.split()
            cuda = next(w for w in words if w.startswith("--use_cuda="))
            gpus[words[words.index("-d") + 1]] = int(cuda.split("=")[1])
    assert gpus == {f"mlx5_{n}": n for n in range(8)}


def test_in_pairs_the_slower_port_sets_the_floor(run_cli, node):
    rate = Path(node["sys"], "class", "infiniband", "mlx5_1", "ports", "1", "rate")
    rate.write_text("100 Gb/sec (4X EDR)\n")
    (node["tmp"] / "ibdiag.toml").write_text(
        'perftest_duration_s = 1\nperftest_pairing = "pairs"\n'
    )
    _, results, _ = full_check(run_cli, node)
    into_slow = next(r for r in results["perftest.bandwidth"] if r["target"] == "mlx5_0:1")
    assert "(90% of the 100 Gb/s link rate) to mlx5_1:1" in into_slow["message"], into_slow


# -- issue 12 item 10: level full is bounded ----------------------------------------------------


def _traffic_runs(report) -> list:
    return [c for c in report["snapshot"]["commands"].values() if c["argv"][0] == "ib_write_bw"]


def test_deadline_and_command_timeout_bound_a_hung_ib_write_bw(run_cli, node):
    """A hung ib_write_bw ran 35 s per attempt plus a retry (76 s) at --deadline 5
    --command-timeout 2: both options bind at level full, and a run they cut short is not
    judged (warn), never failed: the caller chose the limit, the port did nothing wrong."""
    import time

    mark = S.marker()
    node["bin"].add("ib_write_bw", S.hangs(mark))
    started = time.monotonic()
    code, results, report = full_check(run_cli, node, "--deadline", "5", "--command-timeout", "2")
    wall = time.monotonic() - started
    assert wall < 5 + 4.0, f"level full took {wall:.1f} s past a 5 s deadline"
    assert S.wait_no_strays(mark) == []
    runs = _traffic_runs(report)
    assert runs, report["snapshot"]["commands"]
    for run in runs:
        assert run["skipped"] or (run["timed_out"] and run["duration_s"] < 2 + 1.5), run
    for result in results["perftest.bandwidth"]:
        assert result["status"] in ("warn", "skip"), result
        assert "not judged" in result["message"] or "not run" in result["message"], result
    assert code == 1


def test_an_explicit_deadline_leaves_later_attempts_recorded_as_never_started(run_cli, node):
    import time

    mark = S.marker()
    node["bin"].add("ib_write_bw", S.hangs(mark))
    started = time.monotonic()
    _, _, report = full_check(run_cli, node, "--deadline", "2")
    assert time.monotonic() - started < 2 + 4.0
    assert S.wait_no_strays(mark) == []
    skipped = [run for run in _traffic_runs(report) if run["skipped"]]
    assert skipped, _traffic_runs(report)  # the retries: no time was left for them
    for run in skipped:
        assert run["skipped"] == "the run's deadline of 2 s had passed", run
        assert run["rc"] is None and run["duration_s"] < 0.5, run


def test_without_deadline_level_full_keeps_its_own_documented_bound():
    """README "Level full": 2 x (perftest_duration_s + 31 s), + nccl_timeout_s with nccl-tests."""
    th = Thresholds(perftest_duration_s=5, nccl_tests="/opt/nccl-tests/all_reduce_perf")
    assert families.full_level_bound(th, ["perftest"]) == 72
    assert families.full_level_bound(th, ["perftest", "nccl_tests", "nccl_inspector"]) == 72 + 600
    assert families.full_level_bound(Thresholds(), ["nccl_tests"]) == 1.0


def test_the_default_deadline_does_not_cut_level_full_short(run_cli, node, monkeypatch):
    """--deadline's default (25 s) bounds the read-only commands; the traffic tests run to
    their own timeouts (here shortened) and a hung one fails as before."""
    monkeypatch.setattr(bandwidth, "STARTUP_ALLOWANCE_S", 1.0)
    mark = S.marker()
    node["bin"].add("ib_write_bw", S.hangs(mark))
    _, results, report = full_check(run_cli, node)
    for run in _traffic_runs(report):
        assert run["timed_out"] and run["duration_s"] > 1.5, run  # 1 s + 1 s allowance
    assert {r["status"] for r in results["perftest.bandwidth"]} == {"fail"}
    assert S.wait_no_strays(mark) == []


def test_a_slow_first_run_whose_retry_had_no_time_left_warns_rather_than_fails(run_cli, node):
    """The retry guards against one noisy run draining a node: without it, no fail."""
    Path(node["state"], "mlx5_0.1.out").write_text(Path(HALF_RATE).read_text())
    code, results, _ = full_check(run_cli, node, "--deadline", "2")
    slow = next(r for r in results["perftest.bandwidth"] if r["target"] == "mlx5_0:1")
    assert slow["status"] == "warn", slow
    assert "retry was not run" in slow["message"] or "not judged" in slow["message"], slow
    assert code == 1


def test_every_planned_tcp_port_and_its_retrys_is_a_tcp_port_however_many_ports():
    """perftest_base_port + index (+ RETRY_PORT_OFFSET): at the highest base Thresholds allows,
    a node with more than 435 ACTIVE ports would pass 65535; the port wraps round to 1024."""
    from ibdiag.model import Device, LinkRate, Port

    rate = LinkRate(raw="200 Gb/sec (4X HDR)", gbps=200.0)
    port = Port(number=1, path="p", state=4, link_layer="InfiniBand", rate=rate)
    devices = [Device(name=f"mlx5_{i}", path=f"d{i}", ports=[port]) for i in range(600)]
    th = Thresholds(perftest_base_port=65000)
    tests = traffic.plan_loopback(devices, th, lambda dev: True, lambda name: None, lambda n: [])
    ports = [test.tcp_port for test in tests]
    assert ports[:436] == list(range(65000, 65436)) and ports[436] == 1024
    assert len(set(ports)) == 600
    assert all(1024 <= p and p + traffic.RETRY_PORT_OFFSET <= 65535 for p in ports)
    assert [traffic.loopback_tcp_port(18515, i) for i in range(3)] == [18515, 18516, 18517]
