"""Level full, beyond ib_write_bw: nccl-tests, NCCL Inspector dumps, the GPU-HCA topology,
a support bundle of a full run, and the terminal status line. Stub executables print real
captures from tests/fixtures."""

from __future__ import annotations

import io
import json
import os
import shutil
import time
from pathlib import Path

import pytest
import stubs as S
from conftest import FIXTURES_DIR
from sysfs_builder import mlx5_node, write_node, write_nvidia_gpus

from ibdiag.render.progress import StatusLine

NCCL_ONE_NODE = S.fixture("nccl_tests", "gcm-allreduce-1node-8xA100-80GB-nccl2.16.2.txt")
NCCL_TWO_NODES = S.fixture("nccl_tests", "gcm-allreduce-2node-16xA100-80GB-nccl2.12.12.txt")
NCCL_NET_IB = S.fixture(
    "nccl_tests", "nccl-issue1698-roce-mlx5_10-net-ib-completion-status12-vendor-err-129.txt"
)
NCCL_NO_SLOTS = S.fixture("nccl_tests", "gcm-allreduce-mpirun-not-enough-slots-error.txt")
INSPECTOR_JSON = S.fixture(
    "nccl_inspector",
    "nccl-readme-inspector-json-v4.4-dump_stats-coll_perf-allreduce-16GiB-and-verbose-reducescatter.txt",
)
INSPECTOR_PROM = S.fixture(
    "nccl_inspector", "nccl-readme-nvl72004-inspector-prom-allreduce-4-5GB-and-p2p-send.txt"
)
TOPO_RAIL = S.fixture("nvidia_smi_topo", "sglang-issue30401-8xH100-8xmlx5-PIX-rail.txt")


@pytest.fixture
def node(tmp_path, monkeypatch):
    """8 HDR HCAs and 8 H100s in sysfs; stub tools alone on PATH; no ib_write_bw (skips)."""
    sys_root = tmp_path / "sys"
    write_node(str(sys_root), mlx5_node(8))
    write_nvidia_gpus(str(sys_root), 8)
    bin_dir = S.StubBin(tmp_path / "bin")
    monkeypatch.setenv("PATH", bin_dir.path)
    monkeypatch.delenv("NCCL_INSPECTOR_DUMP_DIR", raising=False)
    return {"sys": str(sys_root), "bin": bin_dir, "tmp": tmp_path}


def run_full(run_cli, node, config: str = "", level: str = "full"):
    path = node["tmp"] / "ibdiag.toml"
    path.write_text("perftest_duration_s = 1\n" + config)
    result = run_cli(
        "check", "--level", level, "--sysfs", node["sys"], "--config", str(path), "--json"
    )
    results = {}
    for item in json.loads(result.stdout)["results"]:
        results.setdefault(item["check_id"], []).append(item)
    return result.exit_code, results


def nccl_config(node, capture: str) -> str:
    node["bin"].add("all_reduce_perf", S.prints(capture))
    return f'nccl_tests = "{node["bin"].path}/all_reduce_perf"\n'


# -- nccl-tests --------------------------------------------------------------------------------


def test_nccl_tests_are_not_run_unless_configured(run_cli, node):
    _, results = run_full(run_cli, node)
    (only,) = results["nccl.tests"]
    assert only["status"] == "skip" and "nccl_tests" in only["message"]


def test_one_node_nccl_tests_report_bus_bandwidth_without_a_floor(run_cli, node):
    _, results = run_full(run_cli, node, nccl_config(node, NCCL_ONE_NODE))
    (only,) = results["nccl.tests"]
    assert only["status"] == "pass"
    assert only["observed"] == pytest.approx(231.72)
    assert "8 ranks on 1 node(s), all results correct" in only["message"]
    call = next(c for c in node["bin"].calls() if c.startswith("all_reduce_perf"))
    assert call == "all_reduce_perf -b 8 -e 8G -f 2 -g 8 -n 20 -w 5 -c 1"  # 8 GPUs from sysfs


def test_nccl_floor_fails_a_slow_run(run_cli, node):
    config = nccl_config(node, NCCL_ONE_NODE) + "nccl_busbw_floor_gbytes = 240\n"
    code, results = run_full(run_cli, node, config)
    (only,) = results["nccl.tests"]
    assert code == 2 and only["status"] == "fail"
    assert "231.7 GB/s < 240 (nccl_busbw_floor_gbytes)" in only["message"]


def test_across_nodes_the_floor_is_80_percent_of_one_hcas_link(run_cli, node):
    _, results = run_full(run_cli, node, nccl_config(node, NCCL_TWO_NODES))
    (only,) = results["nccl.tests"]
    # 200 Gb/s HDR = 25 GB/s; 80% = 20 GB/s; the capture's 182.8 GB/s is far above
    assert only["status"] == "pass", only
    assert "16 ranks on 2 node(s)" in only["message"]
    assert only["expected"] == 20.0


def test_a_net_ib_completion_error_fails_naming_the_hca(run_cli, node):
    code, results = run_full(run_cli, node, nccl_config(node, NCCL_NET_IB))
    failed = [r for r in results["nccl.tests"] if r["observed"] == "net-ib-error"]
    assert code == 2 and failed
    assert failed[0]["target"] == "mlx5_10"
    assert "Got completion" in failed[0]["message"]


def test_a_launcher_error_fails_with_its_words(run_cli, node):
    _, results = run_full(run_cli, node, nccl_config(node, NCCL_NO_SLOTS))
    failed = [r for r in results["nccl.tests"] if r["status"] == "fail"]
    assert failed and "not enough slots" in failed[0]["message"]


def _nccl_without_avg(node, concluded: bool) -> str:
    """The one-node capture without its Avg bus bandwidth line, with or without nccl-tests'
    closing '# Collective test concluded' line."""
    lines = [line for line in Path(NCCL_ONE_NODE).read_text().splitlines() if "Avg bus" not in line]
    if concluded:
        lines += ["#", "# Collective test concluded: all_reduce_perf", "#"]
    capture = node["tmp"] / f"nccl-no-avg-{concluded}.txt"
    capture.write_text("\n".join(lines) + "\n")
    return nccl_config(node, str(capture))


def test_a_concluded_run_without_the_average_line_is_not_failed_for_it(run_cli, node):
    code, results = run_full(run_cli, node, _nccl_without_avg(node, concluded=True))
    (only,) = results["nccl.tests"]
    assert code == 0 and only["status"] == "pass", only
    assert only["observed"] == pytest.approx(231.72)


def test_a_run_that_ends_without_the_average_line_nor_concluding_fails(run_cli, node):
    _, results = run_full(run_cli, node, _nccl_without_avg(node, concluded=False))
    (only,) = results["nccl.tests"]
    assert only["status"] == "fail"
    assert "ended without its '# Avg bus bandwidth' line" in only["message"]


def test_a_missing_nccl_tests_binary_warns(run_cli, node):
    _, results = run_full(run_cli, node, f'nccl_tests = "{node["tmp"]}/no/all_reduce_perf"\n')
    (only,) = results["nccl.tests"]
    assert only["status"] == "warn" and only["observed"] == "not-runnable"


# The run is the one the config asked for, whatever its program is called: nccl-tests built
# with NAME_SUFFIX=_mpi, or a site's wrapper script.
NOT_PERF_NAMES = ["all_reduce_perf_mpi", "run-nccl-allreduce.sh"]


@pytest.mark.parametrize("program", NOT_PERF_NAMES)
def test_a_configured_run_not_named_perf_is_graded(run_cli, node, program):
    node["bin"].add(program, S.prints(NCCL_ONE_NODE))
    _, results = run_full(run_cli, node, f'nccl_tests = "{node["bin"].path}/{program}"\n')
    (only,) = results["nccl.tests"]
    assert only["status"] == "pass" and only["observed"] == pytest.approx(231.72), only


@pytest.mark.parametrize("program", NOT_PERF_NAMES)
def test_a_net_ib_error_in_a_run_not_named_perf_fails_naming_the_hca(run_cli, node, program):
    node["bin"].add(program, S.prints(NCCL_NET_IB))
    code, results = run_full(run_cli, node, f'nccl_tests = "{node["bin"].path}/{program}"\n')
    failed = [r for r in results["nccl.tests"] if r["observed"] == "net-ib-error"]
    assert code == 2 and failed, results["nccl.tests"]
    assert failed[0]["target"] == "mlx5_10" and "Got completion" in failed[0]["message"]


def test_a_run_of_another_perf_program_is_not_taken_for_nccl_tests():
    """Found by the role it was run for, never by a program name ending in _perf."""
    from snapshots import interpreted, run, snapshot

    from ibdiag import roles
    from ibdiag.model import CommandRun

    output = Path(NCCL_NET_IB).read_text()
    unplanned = CommandRun(argv=["/opt/nccl-tests/build/all_reduce_perf"], rc=0, stdout=output)
    node = snapshot()
    alone = interpreted(node.model_copy(update={"commands": {unplanned.key: unplanned}}))
    assert alone.nccl_tests is None
    (only,) = run("nccl.tests", alone)
    assert only.status.value == "skip" and "not run" in only.message
    planned = CommandRun(argv=["/opt/site/nccl.sh"], rc=0, stdout=output, role=roles.NCCL_TESTS)
    results = run(
        "nccl.tests", interpreted(node.model_copy(update={"commands": {planned.key: planned}}))
    )
    assert [r.target for r in results if r.status.value == "fail"][:1] == ["mlx5_10"], results


def _bundle_of_a_net_ib_failure(run_cli, node, program: str):
    """A level-full bundle (a directory) whose nccl-tests run, ``program``, hit a NET/IB error."""
    node["bin"].add(program, S.prints(NCCL_NET_IB))
    config = node["tmp"] / "ibdiag.toml"
    config.write_text(f'perftest_duration_s = 1\nnccl_tests = "{node["bin"].path}/{program}"\n')
    out = node["tmp"] / "out"
    made = run_cli("collect", "--level", "full", "--sysfs", node["sys"], "--config", str(config),
                   "-o", str(out))  # fmt: skip
    assert made.exit_code == 0, made.stderr
    (bundle,) = out.iterdir()
    return bundle


def test_the_nccl_tests_role_survives_a_bundle(run_cli, node):
    bundle = _bundle_of_a_net_ib_failure(run_cli, node, "all_reduce_perf_mpi")
    manifest = json.loads((bundle / "manifest.json").read_text())
    roles = {entry["role"] for entry in manifest["commands"]}
    assert "nccl-tests" in roles, roles
    assert _nccl_fails_naming_mlx5_10(run_cli, bundle)


def _nccl_fails_naming_mlx5_10(run_cli, bundle) -> bool:
    replayed = run_cli("report", str(bundle), "--json")
    results = [r for r in json.loads(replayed.stdout)["results"] if r["check_id"] == "nccl.tests"]
    return any(r["status"] == "fail" and r["target"] == "mlx5_10" for r in results)


def test_a_bundle_from_before_roles_finds_the_run_by_its_configured_program(run_cli, node):
    """An old manifest has no role: the nccl-tests run is the one whose argv holds the
    bundle's configured nccl_tests program; a run of any other program has no role."""
    bundle = _bundle_of_a_net_ib_failure(run_cli, node, "run-nccl-allreduce.sh")
    path = bundle / "manifest.json"
    manifest = json.loads(path.read_text())
    for entry in manifest["commands"]:
        del entry["role"]
    path.write_text(json.dumps(manifest))
    assert _nccl_fails_naming_mlx5_10(run_cli, bundle)
    manifest["thresholds"]["nccl_tests"] = "/opt/nccl-tests/build/all_reduce_perf"
    path.write_text(json.dumps(manifest))
    replayed = run_cli("report", str(bundle), "--json")
    (only,) = [r for r in json.loads(replayed.stdout)["results"] if r["check_id"] == "nccl.tests"]
    assert only["status"] == "skip", only


# -- NCCL Inspector ----------------------------------------------------------------------------


def inspector_dir(node, files) -> Path:
    folder = node["tmp"] / "inspector"
    folder.mkdir(exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder


def test_inspector_dumps_without_a_straggler_pass(run_cli, node):
    text = Path(INSPECTOR_PROM).read_text()
    folder = inspector_dir(node, {"nccl_inspector_metrics_GPU-aaaa.prom": text})
    _, results = run_full(run_cli, node, f'nccl_inspector_dir = "{folder}"\n')
    (only,) = results["nccl.inspector"]
    assert only["status"] == "pass" and "2 samples in 1 dump(s)" in only["message"]


def test_inspector_flags_a_gpu_far_below_its_peers(run_cli, node):
    base = Path(INSPECTOR_PROM).read_text()
    files = {}
    for gpu, bandwidth in (("GPU0", "678.263"), ("GPU1", "670.1"), ("GPU2", "301.5")):
        text = base.replace('gpu="GPU0"', f'gpu="{gpu}"').replace("678.263", bandwidth)
        files[f"nccl_inspector_metrics_{gpu}.prom"] = text
    folder = inspector_dir(node, files)
    _, results = run_full(run_cli, node, f'nccl_inspector_dir = "{folder}"\n')
    slow = [r for r in results["nccl.inspector"] if r["status"] == "warn"]
    assert [r["target"].split(":")[-1] for r in slow] == ["GPU2"], results["nccl.inspector"]
    assert "straggler: AllReduce 4 GiB at 301.5 GB/s" in slow[0]["message"]


def test_inspector_floor_and_half_written_files(run_cli, node):
    text = Path(INSPECTOR_PROM).read_text()
    half = text[: len(text) - 20]  # the inspector was rewriting it: the last line is cut
    folder = inspector_dir(node, {"nccl_inspector_metrics_GPU-a.prom": half})
    _, results = run_full(
        run_cli, node, f'nccl_inspector_dir = "{folder}"\nnccl_inspector_floor_gbytes = 700\n'
    )
    failed = [r for r in results["nccl.inspector"] if r["status"] == "fail"]
    assert failed and "678.3 GB/s < 700" in failed[0]["message"]


def test_old_inspector_dumps_are_ignored(run_cli, node):
    folder = inspector_dir(node, {"nccl_inspector_metrics_x.prom": "stale\n"})
    old = time.time() - 7200
    os.utime(folder / "nccl_inspector_metrics_x.prom", (old, old))
    _, results = run_full(run_cli, node, f'nccl_inspector_dir = "{folder}"\n')
    (only,) = results["nccl.inspector"]
    assert only["status"] == "skip" and "no recent NCCL Inspector dump" in only["message"]


# -- GPU topology ------------------------------------------------------------------------------


def rail_node(node) -> None:
    """nvidia-smi topo prints the sglang 8xH100 node: GPU n with mlx5_n (PIX), GPUs 0-3 on
    NUMA node 0 and 4-7 on 1: put the HCAs where that node has them."""
    node["bin"].add("nvidia-smi", S.prints(TOPO_RAIL))
    for index in range(4, 8):
        Path(node["sys"], "class", "infiniband", f"mlx5_{index}", "device", "numa_node").write_text(
            "1\n"
        )


def test_every_gpu_paired_with_its_pix_hca(run_cli, node):
    rail_node(node)
    _, results = run_full(run_cli, node, level="standard")
    pairs = {r["target"]: r["message"] for r in results["topology.gpu_hca"]}
    assert pairs["mlx5_3"] == "nearest GPU GPU3 (PIX)"
    assert {r["status"] for r in results["topology.gpu_hca"]} == {"pass"}
    assert len(pairs) == 8


def test_an_hca_on_the_other_numa_node_than_its_gpu_warns(run_cli, node):
    rail_node(node)
    numa = Path(node["sys"], "class", "infiniband", "mlx5_6", "device", "numa_node")
    numa.write_text("0\n")  # nvidia-smi puts GPU6 (and so its HCA) on NUMA node 1
    _, results = run_full(run_cli, node, level="standard")
    warned = [r for r in results["topology.gpu_hca"] if r["status"] == "warn"]
    assert [r["target"] for r in warned] == ["mlx5_6"]
    assert "on NUMA node 0, GPU6 on 1" in warned[0]["message"]


def test_no_nvidia_smi_is_a_skip_naming_why(run_cli, node):
    _, results = run_full(run_cli, node, level="standard")
    (only,) = results["topology.gpu_hca"]
    assert only["status"] == "skip" and "nvidia-smi is not installed" in only["message"]


# -- a full run's bundle, replayed ---------------------------------------------------------------


def test_a_full_bundle_holds_the_runs_and_dumps_and_regrades_the_same(run_cli, node):
    node["bin"].add("nvidia-smi", S.prints(TOPO_RAIL))
    folder = inspector_dir(
        node, {"nccl_inspector_metrics_G.prom": Path(INSPECTOR_PROM).read_text()}
    )
    config = node["tmp"] / "ibdiag.toml"
    config.write_text(nccl_config(node, NCCL_ONE_NODE) + f'nccl_inspector_dir = "{folder}"\n')
    out = node["tmp"] / "out"
    made = run_cli("collect", "--level", "full", "--sysfs", node["sys"], "--config", str(config),
                   "--tarball", "-o", str(out))  # fmt: skip
    assert made.exit_code == 0, made.stderr
    bundle = next(out.glob("*.tar.gz"))
    replayed = run_cli("report", str(bundle), "--json")
    report = json.loads(replayed.stdout)
    assert report["level"] == "full"
    by_check = {r["check_id"]: r for r in report["results"]}
    assert by_check["nccl.tests"]["observed"] == pytest.approx(231.72)
    assert by_check["nccl.inspector"]["status"] == "pass"
    assert report["snapshot"]["nccl_inspector"][0]["name"] == "nccl_inspector_metrics_G.prom"
    import tarfile

    with tarfile.open(bundle) as tar:
        names = tar.getnames()
        live = json.load(tar.extractfile(next(n for n in names if n.endswith("/report.json"))))
    assert any(name.endswith("nccl_inspector/001-nccl_inspector_metrics_G.prom") for name in names)
    # replay parses the runs and dumps again into the same typed fields collect made
    typed = ("nccl_tests", "nccl_inspector_dumps")
    assert live["snapshot"]["nccl_tests"]["rows"] and live["snapshot"]["nccl_inspector_dumps"]
    assert {k: report["snapshot"][k] for k in typed} == {k: live["snapshot"][k] for k in typed}


def _redaction_map(bundle: Path):
    """original -> replacement, from the map ibdiag writes beside a redacted bundle."""
    rows = json.loads(Path(str(bundle)[: -len(".tar.gz")] + ".redaction-map.json").read_text())
    pairs = sorted(((r["original"], r["replacement"]) for r in rows), key=lambda p: -len(p[0]))

    def apply(value):
        if not isinstance(value, str):
            return value
        for original, replacement in pairs:
            value = value.replace(original, replacement)
        return value

    return apply


def _graded(run_cli, bundle: Path, redact=lambda value: value):
    """The results ``ibdiag report BUNDLE`` grades (their words passed through ``redact``),
    and what it warned about."""
    replayed = run_cli("report", str(bundle), "--json")
    assert replayed.exit_code in (0, 1, 2), replayed.stderr
    results = json.loads(replayed.stdout)["results"]
    keys = ("check_id", "target", "status", "message", "observed", "expected")
    graded = sorted(tuple(redact(r[key]) for key in keys) for r in results)
    return graded, replayed.stderr


def test_a_redacted_full_bundle_names_no_host_and_regrades_as_the_plain_one(run_cli, node):
    """The hostname is in the mpirun command line (so in a commands/ member name) and in an
    Inspector dump's name (<hostname>-pid<pid>.log): both member names are redacted, the
    manifest matches the files, and replay grades what the unredacted bundle grades. The other
    node mpirun's -H names is redacted too."""
    import tarfile

    host, peer = "gpu017", "gpu018"
    proc = node["tmp"] / "proc"
    (proc / "sys" / "kernel").mkdir(parents=True)
    (proc / "sys" / "kernel" / "hostname").write_text(f"{host}\n")
    capture = node["tmp"] / "nccl-tests-on-gpu017.txt"
    capture.write_text(Path(NCCL_ONE_NODE).read_text().replace("{hostname}", host))
    node["bin"].add("mpirun", S.prints(capture))
    dump = Path(INSPECTOR_JSON).read_text().replace("example-hostname", host)
    folder = inspector_dir(node, {f"{host}-pid1639453.log": dump})
    config = node["tmp"] / "ibdiag.toml"
    config.write_text(
        f'nccl_tests = "{node["bin"].path}/all_reduce_perf"\nnccl_launcher = "mpirun"\n'
        f'nccl_launcher_args = ["--allow-run-as-root", "-H", "{host}:8,{peer}:8"]\n'
        "nccl_gpus = 8\n"
        f'nccl_inspector_dir = "{folder}"\n'
    )
    bundles = {}
    for kind, extra in (("plain", ()), ("redacted", ("--redact", "all"))):
        out = node["tmp"] / kind
        made = run_cli("collect", "--level", "full", "--sysfs", node["sys"], "--procfs",
                       str(proc), "--config", str(config), "--tarball", "-o", str(out),
                       *extra)  # fmt: skip
        assert made.exit_code == 0, made.stderr
        bundles[kind] = next(out.glob("*.tar.gz"))
    with tarfile.open(bundles["plain"]) as tar:  # the hostname really is in both names
        names = tar.getnames()
    assert any(f"-H_{host}_8_{peer}_8" in name for name in names), names
    assert any(name.endswith(f"-{host}-pid1639453.log") for name in names), names
    with tarfile.open(bundles["redacted"]) as tar:
        for member in tar.getmembers():
            assert host not in member.name.lower() and peer not in member.name, member.name
            if member.isfile():
                text = tar.extractfile(member).read().decode("utf-8", "replace")
                assert host not in text.lower() and peer not in text.lower(), member.name
    plain, plain_warnings = _graded(run_cli, bundles["plain"], _redaction_map(bundles["redacted"]))
    redacted, warnings = _graded(run_cli, bundles["redacted"])
    assert plain_warnings == "" and warnings == "", warnings  # nothing missing, nothing extra
    assert redacted == plain
    nccl = [r for r in redacted if r[0] == "nccl.tests"]
    assert [r[2] for r in nccl] == ["pass"] and nccl[0][4] == pytest.approx(231.72)
    inspector = [r for r in redacted if r[0] == "nccl.inspector"]
    assert [r[2] for r in inspector] == ["pass"], inspector


# -- the status line ---------------------------------------------------------------------------


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_status_line_shows_what_runs_on_a_terminal_and_clears_itself():
    terminal = _Terminal()
    with StatusLine(terminal, interval_s=0.05) as status:
        status.say("ib_write_bw attempt 1: mlx5_0:1, mlx5_1:1")
        time.sleep(0.2)
    text = terminal.getvalue()
    assert "\r\033[K[   0 s] ib_write_bw attempt 1: mlx5_0:1, mlx5_1:1" in text
    assert text.count("ib_write_bw attempt 1") >= 2  # redrawn with the elapsed time
    assert text.endswith("\r\033[K")


def test_the_status_line_is_silent_when_not_a_terminal():
    pipe = io.StringIO()
    with StatusLine(pipe, interval_s=0.05) as status:
        status.say("nccl-tests on 8 GPU(s)")
        time.sleep(0.1)
    assert pipe.getvalue() == ""


def test_real_perftest_without_a_device_fails_with_its_own_words(run_cli, tmp_path, monkeypatch):
    """Debian's ib_write_bw on a machine with no RDMA device (CI installs perftest)."""
    real = shutil.which("ib_write_bw", path="/usr/bin:/usr/local/bin")
    assert real, "ib_write_bw (Debian perftest) is not installed: .ci/run installs it"
    sys_root = tmp_path / "sys"
    write_node(str(sys_root), mlx5_node(1))
    monkeypatch.setenv("PATH", os.path.dirname(real))
    config = tmp_path / "ibdiag.toml"
    config.write_text("perftest_duration_s = 1\n")
    result = run_cli("check", "--level", "full", "--sysfs", str(sys_root), "--config",
                     str(config), "--json")  # fmt: skip
    (bandwidth,) = [r for r in json.loads(result.stdout)["results"]
                    if r["check_id"] == "perftest.bandwidth"]  # fmt: skip
    assert bandwidth["status"] == "fail"
    assert (
        "Did not detect devices" in bandwidth["message"] or "Unable to find" in bandwidth["message"]
    ), bandwidth
    assert os.path.isdir(FIXTURES_DIR)


def test_nccl_tests_garbage_fails_as_incomplete(run_cli, node):
    node["bin"].add("all_reduce_perf", S.garbage())
    config = f'nccl_tests = "{node["bin"].path}/all_reduce_perf"\n'
    _, results = run_full(run_cli, node, config)
    failed = [r for r in results["nccl.tests"] if r["status"] == "fail"]
    assert failed and "nccl-tests failed" in failed[0]["message"], results["nccl.tests"]


def test_mpirun_launcher_with_its_arguments_starts_one_rank_per_gpu(run_cli, node):
    node["bin"].add("mpirun", S.prints(NCCL_TWO_NODES))
    config = (
        f'nccl_tests = "{node["bin"].path}/all_reduce_perf"\nnccl_launcher = "mpirun"\n'
        'nccl_launcher_args = ["--allow-run-as-root", "-H", "gpu1:8,gpu2:8"]\nnccl_gpus = 16\n'
    )
    _, results = run_full(run_cli, node, config)
    call = next(c for c in node["bin"].calls() if c.startswith("mpirun"))
    assert call.startswith("mpirun -np 16 --bind-to numa --allow-run-as-root -H gpu1:8,gpu2:8 ")
    assert call.endswith("all_reduce_perf -b 8 -e 8G -f 2 -g 1 -n 20 -w 5 -c 1")
    assert results["nccl.tests"][0]["status"] == "pass"


def test_inspector_default_json_mode_files_are_read(run_cli, node):
    """NCCL's default JSON mode writes <hostname>-pid<pid>.log, not nccl_inspector_*."""
    folder = inspector_dir(node, {"node1-pid4242.log": Path(INSPECTOR_JSON).read_text()})
    _, results = run_full(run_cli, node, f'nccl_inspector_dir = "{folder}"\n')
    (only,) = results["nccl.inspector"]
    assert only["status"] == "pass" and "2 samples in 1 dump(s)" in only["message"], only


def test_inspector_reads_no_hard_link_no_symlink_and_the_newest_part_of_a_big_file(tmp_path):
    from ibdiag.families.nccl_inspector import files as inspector_files

    folder = tmp_path / "dumps"
    folder.mkdir()
    secret = tmp_path / "shadow"
    secret.write_text("root:$6$secret\n")
    os.link(secret, folder / "nccl_inspector_metrics_a.prom")
    (folder / "nccl_inspector_metrics_b.prom").symlink_to(secret)
    big = folder / "gpu1-pid7.log"
    lines = [f'{{"line": {n}}}' for n in range(400000)]
    big.write_text("\n".join(lines) + "\n")
    files, problem = inspector_files.read_dumps(str(folder), 3600, time.time())
    assert [dump.name for dump in files] == ["gpu1-pid7.log"]
    assert "hard link" in problem
    (dump,) = files
    assert dump.truncated and len(dump.text) <= inspector_files.MAX_BYTES
    assert dump.text.startswith('{"line": ') and dump.text.endswith('{"line": 399999}\n')
    assert "secret" not in "".join(d.text for d in files)


def test_inspector_values_are_printed_without_terminal_escapes(run_cli, node):
    base = Path(INSPECTOR_PROM).read_text()
    files = {}
    for gpu, bandwidth in (("GPU0", "678.263"), ("GPU1", "670.1"), ("GPU2", "301.5")):
        text = base.replace('gpu="GPU0"', f'gpu="{gpu}"').replace("678.263", bandwidth)
        files[f"nccl_inspector_metrics_{gpu}.prom"] = text.replace(
            "nvl72004-T01", "evil\x1b]0;pwned\x07"
        )
    folder = inspector_dir(node, files)
    result = run_cli("check", "--level", "full", "--sysfs", node["sys"], "--config",
                     str(_config(node, f'nccl_inspector_dir = "{folder}"\n')))  # fmt: skip
    assert "evil?]0;pwned?:GPU2" in result.stdout  # the straggler, named, made inert
    assert "\x1b" not in result.stdout and "\x07" not in result.stdout


def _config(node, text: str) -> Path:
    path = node["tmp"] / "ibdiag.toml"
    path.write_text("perftest_duration_s = 1\n" + text)
    return path


def test_the_status_line_fits_one_terminal_row(monkeypatch):
    import shutil as shutil_module

    monkeypatch.setattr(
        shutil_module, "get_terminal_size", lambda fallback=None: os.terminal_size((40, 24))
    )
    terminal = _Terminal()
    with StatusLine(terminal, interval_s=10) as status:
        status.say("ib_write_bw attempt 1: " + ", ".join(f"mlx5_{n}:1" for n in range(8)))
    drawn = [part for part in terminal.getvalue().split("\r\033[K") if part]
    assert drawn and all(len(part) <= 39 for part in drawn), drawn


# -- issue 12 item 10: nccl-tests within the run's bound --------------------------------------


@pytest.mark.parametrize(
    "limits", [("--deadline", "3"), ("--command-timeout", "1")], ids=["deadline", "timeout"]
)
def test_nccl_tests_are_cut_at_an_explicit_limit_and_not_failed_for_it(run_cli, node, limits):
    mark = S.marker()
    node["bin"].add("all_reduce_perf", S.hangs(mark))
    path = node["tmp"] / "ibdiag.toml"
    path.write_text(f'perftest_duration_s = 1\nnccl_tests = "{node["bin"].path}/all_reduce_perf"\n')
    started = time.monotonic()
    result = run_cli(
        "check", "--level", "full", "--sysfs", node["sys"], "--config", str(path), "--json",
        *limits,
    )  # fmt: skip
    assert time.monotonic() - started < 3 + 4.0
    assert S.wait_no_strays(mark) == []
    report = json.loads(result.stdout)
    (only,) = [r for r in report["results"] if r["check_id"] == "nccl.tests"]
    assert only["status"] == "warn" and only["observed"] == "cut-short", only
    assert "not judged" in only["message"], only
    assert result.exit_code == 1
