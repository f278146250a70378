"""The command line: every exit code, every output option, one-line errors (never a traceback)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap

import pytest
from conftest import REPO, SCENARIOS_DIR
from sysfs_builder import mlx5_node, write_node

GOOD = os.path.join(SCENARIOS_DIR, "gcm-8xCX6-HDR-good", "root", "sys")
STUCK = os.path.join(SCENARIOS_DIR, "gcm-8xCX6-HDR-2ports-stuck-INIT", "root", "sys")
FLAPPING = os.path.join(SCENARIOS_DIR, "gcm-8xCX6-HDR-ib4-operstate-down-flapping", "root", "sys")


@pytest.fixture
def empty_sysfs(tmp_path):
    root = tmp_path / "sys"
    root.mkdir()
    return str(root)


# --- exit codes ------------------------------------------------------------------------------


def test_healthy_node_exits_0_with_ok_line(run_cli):
    result = run_cli("check", "--sysfs", GOOD)
    assert result.exit_code == 0
    assert result.stdout.splitlines()[-1].startswith("IBDIAG OK - ")
    assert result.stderr == ""


def test_warning_exits_1_and_names_port(run_cli):
    result = run_cli("check", "--sysfs", FLAPPING)
    assert result.exit_code == 1
    assert "mlx5_6:1" in result.stdout and "netdev.operstate" in result.stdout
    assert result.stdout.splitlines()[-1].startswith("IBDIAG WARNING - 1 warn")


def test_fail_exits_2_one_line_per_failing_port(run_cli):
    result = run_cli("check", "--sysfs", STUCK)
    assert result.exit_code == 2
    fail_lines = [line for line in result.stdout.splitlines() if line.startswith("FAIL")]
    assert len(fail_lines) == 2
    assert any("mlx5_6:1" in line and "2: INIT" in line for line in fail_lines)
    assert any("mlx5_8:1" in line and "2: INIT" in line for line in fail_lines)
    assert all("subnet manager" in line for line in fail_lines)


def test_no_infiniband_exits_3(run_cli, empty_sysfs):
    result = run_cli("check", "--sysfs", empty_sysfs)
    assert result.exit_code == 3
    assert "no InfiniBand devices found" in result.stdout


def test_no_infiniband_but_hcas_expected_exits_2(run_cli, empty_sysfs):
    result = run_cli("check", "--sysfs", empty_sysfs, "--expect-hcas", "8")
    assert result.exit_code == 2
    assert "no InfiniBand devices found under" in result.stdout
    assert "; expected 8" in result.stdout


def test_missing_named_hca_fails_naming_it(run_cli):
    result = run_cli("check", "--sysfs", GOOD, "--expect-hcas", "mlx5_0,mlx5_4")
    assert result.exit_code == 2
    assert "expected HCA mlx5_4 is missing" in result.stdout


def test_ignore_hca_leaves_device_out(run_cli):
    result = run_cli("check", "--sysfs", STUCK, "--ignore-hca", "mlx5_[68]", "--json")
    report = json.loads(result.stdout)
    assert result.exit_code == 0
    assert not any(r["target"].startswith(("mlx5_6", "mlx5_8")) for r in report["results"])


@pytest.mark.parametrize(
    "args, message",
    [
        (["check", "--bogus"], "No such option"),
        (["check", "--level", "turbo"], "'turbo' is not"),
        (["check", "--sysfs", "/does/not/exist"], "does not exist"),
        (["check", "--expect-hcas", ",,"], "give a count"),
        (["check", "--expect-rate", "-5"], "--expect-rate"),
        (["frobnicate"], "No such command"),
        (["explain", "no.such"], "no check or counter 'no.such'"),
    ],
)
def test_usage_errors_are_one_line_exit_3(run_cli, args, message):
    result = run_cli(*args)
    assert result.exit_code == 3
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("ibdiag: error:")
    assert message in lines[0]
    assert "Traceback" not in result.output


def test_broken_dropin_check_is_a_config_error_naming_the_file(run_cli, tmp_path):
    (tmp_path / "site.py").write_text("def broken(:\n")
    result = run_cli("check", "--sysfs", GOOD, "--checks-dir", str(tmp_path))
    assert result.exit_code == 3
    assert "site.py" in result.stderr and "SyntaxError" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_internal_error_is_one_line_exit_3(run_cli, monkeypatch):
    import ibdiag.collect

    def explode(*args, **kwargs):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(ibdiag.collect, "collect", explode)
    monkeypatch.delenv("IBDIAG_DEBUG", raising=False)
    result = run_cli("check", "--sysfs", GOOD)
    assert result.exit_code == 3
    assert result.stderr.strip() == (
        "ibdiag: internal error: RuntimeError: disk on fire (set IBDIAG_DEBUG=1 for a traceback)"
    )


# --- drop-in checks run and a crashing check does not stop the run ----------------------------


def test_dropin_check_runs_and_crash_becomes_error_result(run_cli, tmp_path):
    (tmp_path / "site_checks.py").write_text(
        textwrap.dedent(
            '''
            from ibdiag.model import Result, Status
            from ibdiag.registry import check

            @check("site.hostname", title="Hostname is set")
            def hostname(snap, th):
                """Healthy: the node has a hostname."""
                yield Result(target="node", status=Status.PASS, message="hostname set")

            @check("site.crashy", title="A check with a bug")
            def crashy(snap, th):
                """Healthy: never; this check divides by zero."""
                return [1 / 0]
            '''
        )
    )
    result = run_cli("check", "--sysfs", GOOD, "--checks-dir", str(tmp_path), "--json")
    report = json.loads(result.stdout)
    by_check = {r["check_id"]: r for r in report["results"]}
    assert by_check["site.hostname"]["status"] == "pass"
    assert by_check["site.crashy"]["status"] == "error"
    assert "ZeroDivisionError" in by_check["site.crashy"]["message"]
    assert by_check["link.state"]["status"] == "pass"  # the built-ins still ran
    assert result.exit_code == 3  # an error and no fail: UNKNOWN


# --- outputs ---------------------------------------------------------------------------------


def test_json_is_the_report(run_cli):
    result = run_cli("check", "--sysfs", STUCK, "--json")
    report = json.loads(result.stdout)
    assert report["schema_version"] == 2  # ibdiag.migrate: commands keyed by role
    assert report["verdict"] == "CRITICAL"
    assert len(report["snapshot"]["devices"]) == 8
    assert report["thresholds"]["expect_rate_gbps"] is None


@pytest.mark.parametrize(
    "name, marker",
    [
        ("r.json", '"verdict": "CRITICAL"'),
        ("r.html", "<!DOCTYPE html>"),
        ("r.txt", "IBDIAG CRITICAL"),
    ],
)
def test_output_file_format_from_extension(run_cli, tmp_path, name, marker):
    target = tmp_path / name
    result = run_cli("check", "--sysfs", STUCK, "-o", str(target))
    assert result.exit_code == 2
    assert marker in target.read_text()
    assert result.stdout == ""
    assert sorted(os.listdir(tmp_path)) == [name]  # no temp file left behind


def test_output_file_unwritable_is_one_line_exit_3(run_cli, tmp_path):
    result = run_cli("check", "--sysfs", GOOD, "-o", str(tmp_path / "missing-dir" / "r.json"))
    assert result.exit_code == 3
    assert result.stderr.startswith("ibdiag: error:")


def test_quiet_prints_nothing_but_keeps_exit_code(run_cli):
    result = run_cli("check", "--sysfs", STUCK, "--quiet")
    assert result.exit_code == 2
    assert result.stdout == ""


def test_verbose_lists_passing_results(run_cli):
    result = run_cli("check", "--sysfs", GOOD, "-v")
    assert sum(line.startswith("PASS") for line in result.stdout.splitlines()) > 20


def test_no_colour_when_not_a_tty_or_no_color(run_cli):
    result = run_cli("check", "--sysfs", STUCK, env={"NO_COLOR": "1"})
    assert "\033[" not in result.stdout
    assert "\033[" not in run_cli("check", "--sysfs", STUCK).stdout


def test_colour_on_a_tty_unless_no_color():
    """Under a real pseudo-terminal the status words are coloured; NO_COLOR turns that off."""
    import pty

    def run(env_extra):
        env = {**os.environ, **env_extra}
        env.pop("NO_COLOR", None) if "NO_COLOR" not in env_extra else None
        leader, follower = pty.openpty()
        proc = subprocess.run(
            [sys.executable, "-m", "ibdiag", "check", "--sysfs", STUCK],
            stdout=follower,
            stderr=subprocess.PIPE,
            env=env,
            cwd=REPO,
            timeout=60,
        )
        os.close(follower)
        output = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:
                break
            if not chunk:
                break
            output += chunk
        os.close(leader)
        return proc.returncode, output.decode()

    code, coloured = run({})
    assert code == 2 and "\033[31mFAIL" in coloured
    code, plain = run({"NO_COLOR": "1"})
    assert code == 2 and "\033[" not in plain


def test_html_escapes_hostile_names(run_cli, tmp_path):
    hostile = 'mlx5_"><img src=x onerror=alert(1)>'  # a file name cannot hold "/"
    write_node(str(tmp_path / "sys"), mlx5_node(1, fw_ver="<b>20.1</b>"))
    os.rename(
        tmp_path / "sys" / "class" / "infiniband" / "mlx5_0",
        tmp_path / "sys" / "class" / "infiniband" / hostile,
    )
    result = run_cli("check", "--sysfs", str(tmp_path / "sys"), "--format", "html")
    assert "<img" not in result.stdout and "<b>20.1</b>" not in result.stdout
    assert "&lt;img src=x onerror=alert(1)&gt;" in result.stdout
    assert "&lt;b&gt;20.1&lt;/b&gt;" in result.stdout


# --- other commands --------------------------------------------------------------------------


def test_checks_lists_id_level_title(run_cli):
    result = run_cli("checks")
    assert result.exit_code == 0
    rows = {line.split()[0]: line.split()[1] for line in result.stdout.splitlines()}
    assert rows["link.state"] == "quick" and rows["pci.link"] == "quick"
    assert "Port logical state is ACTIVE" in result.stdout


def test_explain_says_healthy_why_and_what_to_do_for_every_check(run_cli):
    ids = [line.split()[0] for line in run_cli("checks").stdout.splitlines()]
    for check_id in ids:
        result = run_cli("explain", check_id)
        assert result.exit_code == 0
        assert result.stdout.startswith(f"{check_id} - ")
        for section in ("Healthy:", "Why it matters:", "What to do:"):
            assert section in result.stdout, (check_id, section)


def test_schema_is_json_schema_of_the_report(run_cli):
    schema = json.loads(run_cli("schema").stdout)
    assert schema["title"] == "Report"
    assert "verdict" in schema["properties"] and "Snapshot" in schema["$defs"]


def test_version(run_cli):
    from ibdiag import __version__

    result = run_cli("--version")
    assert result.exit_code == 0 and __version__ in result.stdout


def test_no_arguments_shows_help_exit_3(run_cli):
    result = run_cli()
    assert result.exit_code == 3
    assert "Usage:" in result.stdout


# --- the quick level runs no command and imports nothing HTML- or command-related ------------


def test_quick_level_runs_no_command_and_stays_lean(tmp_path):
    stubs = tmp_path / "bin"
    stubs.mkdir()
    marker = tmp_path / "ran"
    for tool in (
        "perfquery",
        "ibstat",
        "ibstatus",
        "ethtool",
        "dmesg",
        "journalctl",
        "lspci",
        "ibv_devinfo",
        "mst",
        "mlxlink",
        "ip",
        "sh",
        "bash",
        "cat",
        "ls",
    ):
        script = stubs / tool
        script.write_text(f"#!/bin/sh\necho {tool} >> {marker}\n")
        script.chmod(script.stat().st_mode | stat.S_IXUSR)
    code = textwrap.dedent(
        f"""
        import sys
        from ibdiag.cli import main
        try:
            main(["check", "--level", "quick", "--sysfs", {STUCK!r}])
        except SystemExit as exit:
            code = exit.code
        lazy = ("jinja2", "sh", "markupsafe")
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in lazy)
        loaded += sorted(m for m in sys.modules if m.startswith("ibdiag.bundle"))
        print("LOADED", loaded, "EXIT", code)
        """
    )
    env = {**os.environ, "PATH": str(stubs)}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO, timeout=60
    )
    assert "LOADED [] EXIT 2" in proc.stdout, proc.stdout + proc.stderr
    assert not marker.exists(), f"a command ran at level quick: {marker.read_text()}"


def test_python_dash_m_ibdiag(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "ibdiag", "check", "--sysfs", GOOD],
        capture_output=True,
        text=True,
        cwd=str(tmp_path),
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert "IBDIAG OK" in proc.stdout


# --- ibdiag counters -------------------------------------------------------------------------


def test_counters_lists_known_and_unknown_counters(run_cli, tmp_path):
    specs = mlx5_node(1)
    specs[0].ports[0].counters["TxWait, Cnt"] = 7  # an hfi1-style name the catalogue lacks
    specs[0].ports[0].counters["symbol_error"] = 3
    write_node(str(tmp_path / "sys"), specs)
    result = run_cli("counters", "--sysfs", str(tmp_path / "sys"))
    assert result.exit_code == 0
    rows = {tuple(line.split()[:2]): line for line in result.stdout.splitlines()[1:]}
    assert "unknown" in rows[("mlx5_0:1", "TxWait,")]
    assert " error " in rows[("mlx5_0:1", "symbol_error")]
    assert "(39350851736 B)" in rows[("mlx5_0:1", "port_rcv_data")]  # words x 4
    assert ("mlx5_0:1", "link_downed") not in rows  # zero counters hidden without --all
    shown_all = run_cli("counters", "--sysfs", str(tmp_path / "sys"), "--all").stdout
    assert "link_downed" in shown_all


def test_counters_with_baseline_shows_change(run_cli, tmp_path):
    write_node(str(tmp_path / "sys"), mlx5_node(1))
    base = tmp_path / "base.json"
    assert run_cli("snapshot", "--sysfs", str(tmp_path / "sys"), "-o", str(base)).exit_code == 0
    counter = tmp_path / "sys" / "class" / "infiniband" / "mlx5_0" / "ports" / "1" / "counters"
    (counter / "symbol_error").write_text("4\n")
    result = run_cli("counters", "--sysfs", str(tmp_path / "sys"), "--baseline", str(base))
    line = next(line for line in result.stdout.splitlines() if "symbol_error" in line)
    assert line.split()[-1] == "+4"
    bad = run_cli("counters", "--sysfs", str(tmp_path / "sys"), "--baseline", str(tmp_path / "x"))
    assert bad.exit_code == 3 and "no such file" in bad.stderr


# --- profiles and site config ----------------------------------------------------------------


def test_profile_expectations_apply(run_cli):
    """The sample node is 8 x HDR 200 named mlx5_N: azure-ndv4 expects mlx5_ib0..7."""
    result = run_cli("check", "--sysfs", GOOD, "--profile", "azure-ndv4")
    assert result.exit_code == 2
    assert "expected HCA mlx5_ib0 is missing" in result.stdout


def test_site_config_over_profile_and_flags_over_both(run_cli, tmp_path):
    site = tmp_path / "ibdiag.toml"
    site.write_text('profile = "azure-ndv4"\nexpect_hca_names = []\n')
    result = run_cli("check", "--sysfs", GOOD, "--config", str(site))
    assert result.exit_code == 0, result.stdout  # 8 HCAs at 200 Gb/s, names not required
    result = run_cli("check", "--sysfs", GOOD, "--config", str(site), "--expect-rate", "400")
    assert result.exit_code == 2
    assert sum("expected 400 Gb/s" in line for line in result.stdout.splitlines()) == 8


def test_config_show_names_every_source(run_cli, tmp_path):
    site = tmp_path / "ibdiag.toml"
    site.write_text('profile = "azure-ndv5"\n[counters.symbol_error]\nrate_fail_per_hour = 60\n')
    result = run_cli("config", "show", "--config", str(site), "--ignore-hca", "mlx5_eth*")
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0] == "# profile: azure-ndv5"
    assert any(
        line.startswith("expect_rate_gbps = 400") and "profile azure-ndv5" in line for line in lines
    )
    assert any(
        'ignore_hcas = ["mlx5_an*", "mlx5_eth*"]' in line and "command line" in line
        for line in lines
    )
    assert any(
        line.startswith("rate_fail_per_hour = 60") and f"config {site}" in line for line in lines
    )


def test_config_profiles_lists_shipped_profiles(run_cli):
    result = run_cli("config", "profiles")
    names = [line.split()[0] for line in result.stdout.splitlines()]
    expected = {
        "generic",
        "azure-ndv5",
        "azure-ndv4",
        "azure-hbv4",
        "azure-hbv3",
        "dgx-h100",
        "crusoe-h100",
    }
    assert expected <= set(names)
    assert all(len(line.split(None, 1)) == 2 for line in result.stdout.splitlines())


@pytest.mark.parametrize(
    "content, message",
    [
        ("expect_rates = 400\n", "unknown key 'expect_rates'"),
        ("expect_rate_gbps = -5\n", "expect_rate_gbps: expected a number greater than 0"),
        ('expect_hcas = "eight"\n', "expect_hcas:"),
        ("[counters.symbl_error]\non_increase = 'fail'\n", "unknown counter"),
        ("expect_hcas = \n", "invalid TOML"),
        ('profile = "no-such-profile"\n', "no such profile"),
    ],
)
def test_bad_config_is_one_line_naming_file_and_key_exit_3(run_cli, tmp_path, content, message):
    site = tmp_path / "site.toml"
    site.write_text(content)
    for command in (["check", "--sysfs", GOOD], ["config", "show"]):
        result = run_cli(*command, "--config", str(site))
        assert result.exit_code == 3
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("ibdiag: error:"), result.stderr
        assert str(site) in lines[0] and message in lines[0]


def test_missing_explicit_config_and_unknown_profile_exit_3(run_cli, tmp_path):
    missing = run_cli("check", "--sysfs", GOOD, "--config", str(tmp_path / "nope.toml"))
    assert missing.exit_code == 3 and "nope.toml" in missing.stderr
    unknown = run_cli("check", "--sysfs", GOOD, "--profile", "azure-ndv9")
    assert unknown.exit_code == 3 and "no such profile" in unknown.stderr


# --- --reason: one stable line for drain reasons -----------------------------------------------


def test_reason_is_one_stable_line_without_counts(run_cli, tmp_path):
    """Two nodes whose errors differ only in count drain with the very same reason."""
    reasons = []
    for index, errors in enumerate((3, 3000)):
        root = tmp_path / f"node{index}"
        write_node(str(root / "sys"), mlx5_node(1))
        base = root / "base.json"
        assert run_cli("snapshot", "--sysfs", str(root / "sys"), "-o", str(base)).exit_code == 0
        counters = root / "sys" / "class" / "infiniband" / "mlx5_0" / "ports" / "1" / "counters"
        (counters / "link_downed").write_text(f"{errors}\n")
        result = run_cli("check", "--sysfs", str(root / "sys"), "--baseline", str(base), "--reason")
        assert result.exit_code == 2
        assert len(result.stdout.splitlines()) == 1
        reasons.append(result.stdout.strip())
    # a counter rise does not heal by itself: held for an admin (ibdiag.held)
    assert reasons[0] == reasons[1] == "ibdiag: held: mlx5_0:1 counters.port_errors link_downed"
    assert run_cli("check", "--sysfs", GOOD, "--reason").stdout == ""


def test_expect_hcas_with_a_non_ascii_digit_is_a_name_not_an_internal_error(run_cli):
    result = run_cli("check", "--sysfs", GOOD, "--expect-hcas", "²")  # isdigit(), but not int()
    assert result.exit_code == 2 and "internal error" not in result.stderr
    assert "expected HCA ² is missing" in result.stdout
