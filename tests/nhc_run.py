"""Run the real LBNL NHC (the unmodified copy in tests/vendor/nhc) with ibdiag's check.

NHC is run from its source tree as its SOURCES.md says: ``bash nhc -D CONFDIR -c CONF -l - -t
TIMEOUT HELPERDIR=... NHC_RM=none MARK_OFFLINE=0``, with CONFDIR/scripts holding NHC's own
``common.nhc`` and ``contrib/nhc/ibdiag.nhc``. NHC resets PATH to /sbin:/usr/sbin:/bin:/usr/bin
and takes its settings as ``VAR=value`` arguments, exactly as on a node.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional, Sequence

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(TESTS_DIR)
NHC_SOURCE = os.path.join(TESTS_DIR, "vendor", "nhc")
NHC_SCRIPT = os.path.join(REPO, "contrib", "nhc", "ibdiag.nhc")
# The ibdiag the tests run: the console script of the environment running pytest.
IBDIAG = os.path.join(os.path.dirname(sys.executable), "ibdiag")
NHC_PATH = "/sbin:/usr/sbin:/bin:/usr/bin"  # what nhc sets PATH to


class NhcRun(NamedTuple):
    rc: int
    output: str  # NHC's log (-l -): stdout and stderr together

    @property
    def failure(self) -> str:
        """The message NHC failed the node with ('' when it passed)."""
        marker = "Health check failed:  "
        lines = [line for line in self.output.splitlines() if marker in line]
        return lines[-1].split(marker, 1)[1] if lines else ""


def nhc_conf_dir(root: Path, conf_lines: Sequence[str]) -> Path:
    """CONFDIR with scripts/{common,ibdiag}.nhc and an nhc.conf of ``conf_lines``."""
    if not os.path.isfile(os.path.join(NHC_SOURCE, "nhc")):
        raise FileNotFoundError(f"NHC is missing: {NHC_SOURCE} (tests/vendor/nhc)")
    scripts = root / "scripts"
    scripts.mkdir(parents=True, exist_ok=True)
    shutil.copy(os.path.join(NHC_SOURCE, "scripts", "common.nhc"), scripts)
    shutil.copy(NHC_SCRIPT, scripts)
    (root / "nhc.conf").write_text("".join(f"{line}\n" for line in conf_lines))
    return root


def nhc_argv(confdir: Path, timeout: int, settings: Sequence[str] = ()) -> List[str]:
    return [
        "bash",
        os.path.join(NHC_SOURCE, "nhc"),
        "-D",
        str(confdir),
        "-c",
        str(confdir / "nhc.conf"),
        "-l",
        "-",
        "-t",
        str(timeout),
        f"HELPERDIR={NHC_SOURCE}/helpers",
        "NHC_RM=none",
        "MARK_OFFLINE=0",
        *settings,
    ]


def run_nhc(
    root: Path,
    conf_lines: Sequence[str],
    timeout: int = 30,
    settings: Sequence[str] = (),
    env: Optional[Dict[str, str]] = None,
) -> NhcRun:
    """Run nhc over ``conf_lines`` (check lines such as ``* || check_ibdiag --sysfs DIR``);
    ``env``: its environment (default: this process's)."""
    confdir = nhc_conf_dir(root / "nhc", conf_lines)
    env = {key: value for key, value in (env or os.environ).items() if key != "IBDIAG_DEBUG"}
    proc = subprocess.run(
        nhc_argv(confdir, timeout, settings),
        cwd=str(root),
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout + 30,
        check=False,
    )
    return NhcRun(proc.returncode, proc.stdout)
