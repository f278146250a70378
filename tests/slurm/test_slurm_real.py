"""contrib/slurm's hooks run by a real Slurm (Debian slurm-wlm 22.05 and munge, started by
tests/slurm_cluster.py on localhost), installed as contrib/slurm/README.md says.

The hooks are copies of the script named ibdiag-prolog, ibdiag-epilog and ibdiag-healthcheck,
and read their settings where a site puts them, /etc/ibdiag/slurm.env: slurmd gives Prolog and
Epilog no PATH, HealthCheckProgram neither PATH nor SLURM_CONF, and none of its own environment,
so there is no other way in. The tests' settings are laid over /etc in a private mount namespace
that only the hook sees (the machine's /etc is never written), and slurmd itself is started with
IBDIAG_SLURM_ENV naming decoy settings, which no hook must read.

The settings' ``--sysfs`` points at ``current``: a symlink the tests switch between a healthy
capture and a broken one (two ports stuck in INIT), the way a repair would change the node.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Dict, List, Tuple

import pytest
from conftest import REPO, SCENARIOS_DIR
from slurm_cluster import SlurmCluster, write_script

from ibdiag.history.store import HistoryStore

HOOK = os.path.join(REPO, "contrib", "slurm", "ibdiag-slurm-hook")
README = Path(REPO, "contrib", "slurm", "README.md")
GOOD_NODE = os.path.join(REPO, "examples", "sample-node", "sys")
STUCK_INIT = os.path.join(SCENARIOS_DIR, "gcm-8xCX6-HDR-2ports-stuck-INIT", "root", "sys")
FLAPPING = os.path.join(SCENARIOS_DIR, "gcm-8xCX6-HDR-ib4-operstate-down-flapping", "root", "sys")
STUCK_INIT_REASON = "ibdiag: mlx5_6:1 link.state 2: INIT and more"
IBDIAG = shutil.which("ibdiag", path=os.path.dirname(sys.executable)) or shutil.which("ibdiag")
# The hook lines of the documented slurm.conf: the tests put their own scripts there.
HOOK_KEYS = {"Prolog", "Epilog", "HealthCheckProgram", "HealthCheckInterval"}


def documented_slurm_conf(readme: Path = README) -> Dict[str, str]:
    """The slurm.conf lines the README tells a site to add: its code block with ``Prolog=``."""
    for block in re.findall(r"^```[a-z]*\n(.*?)^```", readme.read_text(), re.M | re.S):
        lines = [line.split("#", 1)[0].strip() for line in block.splitlines()]
        settings = dict(line.split("=", 1) for line in lines if "=" in line)
        if "Prolog" in settings:
            return settings
    raise AssertionError(f"{readme} has no slurm.conf block with Prolog=")


def documented_sinfo(readme: Path = README) -> Tuple[List[str], str]:
    """The README's ``$ sinfo ...`` command (argv) and the header line it shows under it."""
    lines = readme.read_text().splitlines()
    for number, line in enumerate(lines):
        if line.startswith("$ sinfo"):
            return shlex.split(line[2:]), lines[number + 1]
    raise AssertionError(f"{readme} shows no '$ sinfo' command")


def readme_slurm_section() -> str:
    text = Path(REPO, "README.md").read_text()
    return text.split("\n## Slurm: ", 1)[1].split("\n## ", 1)[0]


def test_both_readmes_give_the_same_slurm_conf_and_sinfo_and_say_where_settings_go(tmp_path):
    """README.md's Slurm section and contrib/slurm/README.md (the one the tests below run)
    agree, and both say why the settings file is the only way in."""
    section = tmp_path / "section.md"
    section.write_text(readme_slurm_section())
    assert documented_slurm_conf(section) == documented_slurm_conf()
    argv, _ = documented_sinfo()
    assert f"`{' '.join(shlex.quote(arg) for arg in argv)}`" in section.read_text()
    for doc in (section, README):
        paragraphs = [" ".join(p.split()) for p in doc.read_text().split("\n\n")]
        said = [p for p in paragraphs if "IBDIAG_SLURM_ENV" in p and "by hand" in p]
        assert [p for p in said if "/etc/ibdiag/slurm.env" in p], doc
        assert [p for p in said if "neither `PATH` nor `SLURM_CONF`" in p], doc
        assert [p for p in paragraphs if "nohold_on_prolog_fail" in p and "Priority=0" in p], doc


# Checks graded on change since a baseline that only report (they never fail or warn on a
# node's health), so no drain ever names them.
REPORTING_ONLY = {"counters.baseline", "counters.congestion", "counters.traffic", "ethtool.pause"}


def test_both_readmes_say_which_drains_are_held_and_that_only_an_admin_resumes_them(tmp_path):
    """The held rule, as the hooks apply it: the checks graded on change since a baseline that
    contrib/slurm/README.md names are the registry's; both READMEs state that only an admin
    resumes a held drain, with no window."""
    from ibdiag.registry import load_registry

    changes = {spec.id for spec in load_registry() if spec.takes_baseline} - REPORTING_ONLY
    for doc, text in (("README.md", readme_slurm_section()), (README, README.read_text())):
        paragraphs = [" ".join(p.split()) for p in text.split("\n\n")]
        held = [p for p in paragraphs if p.startswith("**Held drains wait for an admin.**")]
        assert len(held) == 1, doc
        assert "`ibdiag: held: ...`" in held[0] and "`ibdiag: epilog: ...`" in held[0], doc
        assert "whichever hook drained first" in held[0] and "no time window" in held[0], doc
    named = set(re.findall(r"`([a-z_]+\.[a-z_]+)`", held[0]))  # contrib/slurm/README.md's
    assert named == changes, named ^ changes


class Site:
    """A node's sysfs (switchable), the hooks installed as documented, and their settings."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.good = tmp_path / "good" / "sys"
        shutil.copytree(os.path.dirname(GOOD_NODE), self.good.parent, symlinks=True)
        for port in (self.good / "class" / "infiniband").glob("*/ports/*"):
            (port / "counters").mkdir()  # the capture has none: zeros, as on a clean port
            (port / "counters" / "link_downed").write_text("0\n")
        self.current = tmp_path / "current"
        self.use(str(self.good))
        self.state_dir = tmp_path / "run-ibdiag"
        self.etc = tmp_path / "etc"  # laid over /etc for the hooks: etc/ibdiag/slurm.env
        self.settings = self.etc / "ibdiag" / "slurm.env"
        self.settings.parent.mkdir(parents=True)
        self.log = tmp_path / "hooks.log"
        # What a site might try instead: IBDIAG_SLURM_ENV in slurmd's environment, naming
        # settings whose ibdiag leaves a mark and fails every hook.
        self.decoy_mark = tmp_path / "decoy-ran"
        self.decoy = write_script(
            tmp_path / "decoy-ibdiag", f'#!/bin/sh\necho "$@" >> {self.decoy_mark}\nexit 2\n'
        )
        self.decoy_settings = tmp_path / "decoy.env"
        self.decoy_settings.write_text(f"IBDIAG={self.decoy}\n")

    def use(self, sysfs: str) -> None:
        """Point the node at another sysfs tree (atomically, as a repair would)."""
        temp = self.tmp / "current.new"
        temp.unlink(missing_ok=True)
        temp.symlink_to(sysfs)
        os.replace(temp, self.current)

    def hook(self, name: str) -> str:
        """What Slurm runs as Prolog/Epilog/HealthCheckProgram: the script installed as
        ``ibdiag-<name>`` (the name picks the hook), run with the environment slurmd gave it
        in a mount namespace where /etc/ibdiag/slurm.env is this site's settings file."""
        installed = self.tmp / "slurm" / f"ibdiag-{name}"
        installed.parent.mkdir(exist_ok=True)
        shutil.copy(HOOK, installed)
        installed.chmod(0o755)
        overlay = f"lowerdir={self.etc}:/etc"
        mount = f'{shutil.which("mount")} -t overlay overlay -o {overlay} /etc && exec "$0"'
        return str(
            write_script(
                self.tmp / f"run-ibdiag-{name}",
                f"#!/bin/sh\nexec {shutil.which('unshare')} --mount /bin/sh -c "
                f"{shlex.quote(mount)} {installed} 2>>{self.log}\n",
            )
        )

    def configure(self, cluster: SlurmCluster, extra: str = "") -> None:
        args = ["--sysfs", str(self.current), "--state-dir", str(self.state_dir)]
        self.settings.write_text(
            f"IBDIAG={IBDIAG}\n"
            f"IBDIAG_ARGS=({' '.join(args)})\n"
            "IBDIAG_DEADLINE=15\n"
            # HealthCheckProgram gets no SLURM_CONF: scontrol would read /etc/slurm/slurm.conf
            f"export SLURM_CONF={cluster.conf_path}\n{extra}\n"
        )

    def logged(self) -> str:
        return self.log.read_text() if self.log.exists() else ""


@pytest.fixture
def site(tmp_path):
    return Site(tmp_path / "site")


def start(site: Site, tmp_path: Path, extra_conf=(), timeout: int = 20, **hooks) -> SlurmCluster:
    scripts = {key: site.hook(name) for key, name in hooks.items() if name}
    interval = 1 if "health_check_program" in scripts else None  # Slurm's shortest
    cluster = SlurmCluster(
        tmp_path / "cluster",
        health_check_interval=interval,
        extra_conf=extra_conf,
        prolog_epilog_timeout=timeout,
        daemon_environment={"IBDIAG_SLURM_ENV": str(site.decoy_settings)},
        **scripts,
    )
    site.configure(cluster)
    return cluster


def test_healthy_node_runs_the_job_and_stays_idle(site, tmp_path):
    with start(site, tmp_path, prolog="prolog", epilog="epilog") as cluster:
        job = cluster.sbatch(wrap="echo ran")
        state = cluster.wait_for_job(job, lambda s: s["JobState"] == "COMPLETED")
        assert state["Restarts"] == "0" and state["ExitCode"] == "0:0"
        assert (cluster.jobs_dir / f"job-{job}.out").read_text() == "ran\n"
        assert cluster.wait_for_node_state("IDLE") == ("IDLE", None)
        cluster.wait_for(lambda: not list(site.state_dir.glob("job-*")), 10, "baseline removed")
    assert "drained" not in site.logged(), site.logged()
    # The settings came from /etc/ibdiag/slurm.env (its --state-dir), not slurmd's environment.
    assert site.state_dir.is_dir()
    assert not site.decoy_mark.exists(), site.decoy_mark.read_text()


def test_broken_node_is_drained_by_the_prolog_and_the_job_requeued(site, tmp_path):
    site.use(STUCK_INIT)
    with start(site, tmp_path, prolog="prolog", epilog="epilog") as cluster:
        job = cluster.sbatch(wrap="echo should-not-run")
        # requeued and held (Slurm's default), once the epilog that follows it has run
        state = cluster.wait_for_job(
            job, lambda s: s["JobState"] == "PENDING" and s["Restarts"] == "1"
        )
        assert (state["Reason"], state["Priority"]) == ("launch_failed_requeued_held", "0")
        assert cluster.wait_for_node_state("IDLE+DRAIN") == ("IDLE+DRAIN", STUCK_INIT_REASON)
        assert "should-not-run" not in (cluster.jobs_dir / f"job-{job}.out").read_text()
        assert "Prolog error" not in cluster.node_info()["Reason"]
        cluster.scontrol("release", str(job))  # what an admin must do without nohold
        cluster.wait_for_job(job, lambda s: s["Priority"] != "0", timeout=5)
    assert f"drained {cluster.node_name}: {STUCK_INIT_REASON}" in site.logged()


def test_epilog_drains_on_errors_the_job_drove(site, tmp_path):
    counter = site.good / "class" / "infiniband" / "mlx5_3" / "ports" / "1" / "counters"
    with start(site, tmp_path, prolog="prolog", epilog="epilog") as cluster:
        # The job "fails the cable": the link goes down twice while it runs.
        job = cluster.sbatch(wrap=f"echo 2 > {counter / 'link_downed'}")
        state = cluster.wait_for_job(job, lambda s: s["JobState"] == "COMPLETED")
        assert state["Restarts"] == "0"
        drained = cluster.wait_for_node_state("IDLE+DRAIN")
        assert drained == (
            "IDLE+DRAIN",
            "ibdiag: epilog: mlx5_3:1 counters.port_errors link_downed",
        )
        assert not list(site.state_dir.glob("job-*"))  # the epilog removed the baseline


def test_healthcheck_drains_then_resumes_after_repair(site, tmp_path):
    site.use(STUCK_INIT)
    with start(site, tmp_path, health_check_program="healthcheck") as cluster:
        assert cluster.wait_for_node_state("IDLE+DRAIN") == ("IDLE+DRAIN", STUCK_INIT_REASON)
        site.use(str(site.good))  # the ports came back
        assert cluster.wait_for_node_state("IDLE") == ("IDLE", None)
        job = cluster.sbatch(wrap="true")
        cluster.wait_for_job(job, lambda s: s["JobState"] == "COMPLETED")
    assert f"resumed {cluster.node_name}" in site.logged()


def test_a_counter_rise_stays_drained_until_an_admin_resumes(site, tmp_path):
    """The field report (issue 21): during a long job the health check sees a link_downed
    rise first and drains; the epilog finds the node drained already; the next health checks
    see no new rise. The node must stay drained - a drained node carries no traffic, so quiet
    counters prove nothing - until an admin resumes it; then it stays in service."""
    counter = site.good / "class" / "infiniband" / "mlx5_3" / "ports" / "1" / "counters"
    held = "ibdiag: held: mlx5_3:1 counters.port_errors link_downed"
    hooks = {"prolog": "prolog", "epilog": "epilog", "health_check_program": "healthcheck"}
    with start(site, tmp_path, ["HealthCheckNodeState=ANY"], **hooks) as cluster:
        node = cluster.node_name
        state = site.state_dir / "healthcheck.json"
        cluster.wait_for(state.exists, 10, "the health check's first state file")
        job = cluster.sbatch(wrap="sleep 15")  # long enough for a busy machine
        baseline = site.state_dir / f"job-{job}.json"
        cluster.wait_for(baseline.exists, 10, "the prolog's job baseline")
        (counter / "link_downed").write_text("2\n")  # the link went down twice under the job
        cluster.wait_for(lambda: cluster.node_state()[1] == held, 10, "the health check's drain")
        assert "DRAIN" in cluster.node_state()[0] and cluster.job_state(job)["JobState"] in (
            "RUNNING", "COMPLETING")  # fmt: skip
        cluster.wait_for_job(job, lambda s: s["JobState"] == "COMPLETED")
        cluster.wait_for(
            lambda: f"slurm epilog on {node}: already drained, held" in site.logged(), 15,
            "the epilog finding the node drained",
        )  # fmt: skip
        before = site.logged().count(f"slurm healthcheck on {node}: left drained")
        cluster.wait_for(
            lambda: site.logged().count(f"slurm healthcheck on {node}: left drained")
            >= before + 3, 15, "three health checks after the epilog",
        )  # fmt: skip
        assert cluster.node_state() == ("IDLE+DRAIN", held)
        assert f"resumed {node}" not in site.logged()
        cluster.scontrol("update", f"NodeName={node}", "State=RESUME")  # the admin, once checked
        seen = len(site.logged())
        cluster.wait_for(
            lambda: site.logged()[seen:].count(f"slurm healthcheck on {node}: nothing to resume")
            >= 2, 10, "two health checks after the resume",
        )  # fmt: skip
        assert cluster.node_state() == ("IDLE", None)


# Everything `reason_text` lets through, and far-end text with what it does not.
SAFE_CHARACTERS = "ibdiag: AZaz09 _.,:/+-<->(100<200) 7/8"
HOSTILE_FAR_END = "MF0;\"$(touch {mark})\";`touch {mark}`|&;[root@x]%s#*?{{}}=!'q' <b>\\"


def test_reasons_read_back_from_the_real_scontrol_as_sent(tmp_path, monkeypatch):
    """A far end's node description comes off the fabric and may hold anything: the reason
    ibdiag sends holds only its safe characters, at most 128, and the real slurmctld keeps it
    exactly (no quote stripped, no "[user@time]" stamp mistaken, nothing run)."""
    from snapshots import snapshot

    from ibdiag.facts.partner import Partner, cable_name
    from ibdiag.model import Report, Result, Status, Verdict
    from ibdiag.render.text import REASON_MAX_CHARS, reason_line
    from ibdiag.slurm.scontrol import Scontrol, mark_unhealthy
    from ibdiag.thresholds import Thresholds

    mark = tmp_path / "ran"
    far = Partner(description=HOSTILE_FAR_END.format(mark=mark), port=21)
    finding = Result(
        check_id="link.partner", target=cable_name("mlx5_3:1", far), status=Status.FAIL,
        message="far end Down", observed="Down",
    )  # fmt: skip
    report = Report(
        tool_version="0", level="standard", verdict=Verdict.CRITICAL, verdict_reason="1 fail",
        results=[finding], thresholds=Thresholds(), snapshot=snapshot([]),
    )  # fmt: skip
    reason = reason_line(report)
    assert len(reason) <= REASON_MAX_CHARS and reason.endswith(" link.partner Down"), reason
    with SlurmCluster(tmp_path / "cluster") as cluster:
        monkeypatch.setenv("SLURM_CONF", str(cluster.conf_path))
        scontrol = Scontrol(cluster.node_name)
        for sent in (reason, SAFE_CHARACTERS, f"ibdiag: {'y' * 200}"):
            line = reason_line(report) if sent is reason else sent
            assert mark_unhealthy(scontrol, line).startswith(f"drained {cluster.node_name}")
            expected = line if len(line) <= REASON_MAX_CHARS else line[:125] + "..."
            assert scontrol.show().reason == expected
            assert cluster.node_info()["Reason"].startswith(f"{expected} [root@")
            cluster.scontrol("update", f"NodeName={cluster.node_name}", "State=RESUME")
        # What the safe set keeps out, as the real scontrol takes it: a quote at either end is
        # stripped, so such a reason would not read back as sent.
        cluster.scontrol("update", f"NodeName={cluster.node_name}", "State=DRAIN",
                         'Reason="ibdiag: far end"')  # fmt: skip
        assert scontrol.show().reason == "ibdiag: far end"
    assert not mark.exists()


def test_an_admins_drain_reason_is_left_alone(site, tmp_path):
    site.use(STUCK_INIT)
    with start(site, tmp_path, health_check_program="healthcheck") as cluster:
        node = cluster.node_name
        cluster.scontrol("update", f"NodeName={node}", "State=DRAIN", "Reason=RMA ticket 12")
        site.log.unlink(missing_ok=True)
        cluster.wait_for(lambda: site.logged().count("left alone") >= 2, 10, "two health checks")
        assert cluster.node_state() == ("IDLE+DRAIN", "RMA ticket 12")
        site.use(str(site.good))  # healthy again: still not resumed, it is not our drain
        cluster.wait_for(lambda: site.logged().count("left alone") >= 4, 10, "two more")
        assert cluster.node_state() == ("IDLE+DRAIN", "RMA ticket 12")


def test_the_documented_slurm_conf_requeues_a_turned_away_job_without_holding_it(site, tmp_path):
    """contrib/slurm/README.md's slurm.conf lines, as a site would copy them (the hooks' own
    paths aside): a job the prolog turns away is requeued and not held (Slurm 22.05 holds it,
    Priority=0, without SchedulerParameters=nohold_on_prolog_fail); it is eligible again about
    two minutes later, on another node or on this one once resumed."""
    conf = documented_slurm_conf()
    for key in ("Prolog", "Epilog", "HealthCheckProgram"):
        assert conf[key] == f"/etc/slurm/ibdiag-{key.lower().replace('program', '')}", conf[key]
    extra = [f"{k}={v}" for k, v in conf.items() if k not in HOOK_KEYS | {"PrologEpilogTimeout"}]
    site.use(STUCK_INIT)
    with start(
        site, tmp_path, extra, int(conf["PrologEpilogTimeout"]), prolog="prolog", epilog="epilog"
    ) as cluster:
        job = cluster.sbatch(wrap="echo should-not-run")
        state = cluster.wait_for_job(
            job, lambda s: s["JobState"] == "PENDING" and s["Restarts"] == "1"
        )
        assert state["Reason"] == "BeginTime" and state["Priority"] != "0", state
        eligible = time.mktime(time.strptime(state["EligibleTime"], "%Y-%m-%dT%H:%M:%S"))
        assert 60 < eligible - time.time() <= 125, state["EligibleTime"]
        assert cluster.wait_for_node_state("IDLE+DRAIN") == ("IDLE+DRAIN", STUCK_INIT_REASON)


def test_the_documented_sinfo_shows_the_whole_reason(site, tmp_path):
    """Plain `sinfo -R` cuts a reason at 20 characters; the README's format shows all of it."""
    argv, header = documented_sinfo()
    site.use(STUCK_INIT)
    with start(site, tmp_path, health_check_program="healthcheck") as cluster:
        assert cluster.wait_for_node_state("IDLE+DRAIN") == ("IDLE+DRAIN", STUCK_INIT_REASON)
        plain = cluster.run("sinfo", "-R").stdout
        shown = cluster.run(*argv).stdout.splitlines()
    assert f"\n{STUCK_INIT_REASON[:20]} " in plain and STUCK_INIT_REASON not in plain, plain
    assert argv[:2] == ["sinfo", "-R"] and shown[0].rstrip() == header.rstrip(), shown
    assert [line for line in shown if line.startswith(f"{STUCK_INIT_REASON} ")], shown


def test_a_warning_node_stays_in_service_and_no_hook_reports_a_failure(site, tmp_path):
    """An IPoIB interface down is a WARNING: logged by every health check, never a drain, and
    never taken by the script for an ibdiag that could not run."""
    site.use(FLAPPING)
    with start(site, tmp_path, health_check_program="healthcheck") as cluster:
        cluster.wait_for(lambda: site.logged().count("WARNING") >= 3, 10, "three health checks")
        assert cluster.node_state() == ("IDLE", None)
    warnings = [line for line in site.logged().splitlines() if "WARNING" in line]
    assert all("netdev.operstate down" in line for line in warnings), warnings
    # The script's own lines ("ibdiag: slurm healthcheck: ..."; ibdiag's say "... on NODE:")
    script = [line for line in site.logged().splitlines() if re.match(r"ibdiag: slurm \w+: ", line)]
    assert script == [], script
    assert not site.decoy_mark.exists()


def test_flaps_the_monitor_saw_drain_the_node_through_the_real_health_check(site, tmp_path):
    """Issue 23: a cable that flaps between health checks while ``ibdiag watch`` runs; each
    health check finds it ACTIVE or barely down, and real slurmd's HealthCheckProgram still
    drains the node for the flaps, with the stable reason."""
    store = site.tmp / "history.db"
    port = site.good / "class" / "infiniband" / "mlx5_3" / "ports" / "1"

    def set_link(up: bool) -> None:
        for name, text in (("state", "4: ACTIVE" if up else "1: DOWN"),
                           ("phys_state", "5: LinkUp" if up else "2: Polling")):  # fmt: skip
            temporary = port / f"{name}.new"
            temporary.write_text(text + "\n")
            os.replace(temporary, port / name)

    def closed_outages() -> int:
        with HistoryStore(str(store), busy_s=5) as history:
            guids = {sample.node_guid for sample in history.last_samples()}
            found = history.outages(guids, since=history_epoch)
        return sum(1 for outage in found if outage.end is not None and outage.device == "mlx5_3")

    history_epoch = datetime(1970, 1, 1, tzinfo=timezone.utc)
    cluster = start(site, tmp_path, health_check_program="healthcheck")
    site.configure(cluster, extra=f"IBDIAG_ARGS+=(--history {store})")
    watch = [IBDIAG, "watch", "--interval", "0.1", "--quiet", "--history", str(store),
             "--sysfs", str(site.current)]  # fmt: skip
    with cluster:
        assert cluster.wait_for_node_state("IDLE") == ("IDLE", None)
        monitor = subprocess.Popen(watch, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            cluster.wait_for(store.exists, 10, "the history store")
            for flap in range(1, 4):
                set_link(up=False)
                time.sleep(0.3)  # a few of the monitor's passes, shorter than a health check
                set_link(up=True)
                recorded = lambda count=flap: closed_outages() >= count  # noqa: E731
                cluster.wait_for(recorded, 10, f"flap {flap} recorded")
        finally:
            monitor.send_signal(signal.SIGTERM)
            assert monitor.wait(timeout=10) == 0, monitor.stderr.read()
        # a health check that ran while the port was down drained it for link.state; the next
        # ones find it ACTIVE and the drain stays, now for the flaps
        reason = "ibdiag: mlx5_3:1 link.flaps 3 in 12h"
        drained = ("IDLE+DRAIN", reason)
        cluster.wait_for(lambda: cluster.node_state() == drained, 15, "the drain for the flaps")
        assert port.joinpath("state").read_text() == "4: ACTIVE\n"  # ACTIVE all the while since
    assert f"drained {cluster.node_name}: {reason}" in site.logged()
