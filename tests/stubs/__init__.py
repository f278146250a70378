"""Stub executables for the command-running levels: a bin directory of small /bin/sh scripts.

Tests and benchmarks put ``StubBin.path`` on PATH (alone, so a real ``perfquery`` installed on
the machine can never answer instead of the stub, and "absent" really is absent) and write one
script per tool. Every stub appends its argv to ``calls.log`` before doing anything else, so a
test can tell which commands ran (or that none did).

Behaviours, as script bodies (``StubBin.add(name, body)``):

- ``prints(capture)``: print a recorded capture (``tests/fixtures``) and exit 0;
- ``by_args({pattern: body})``: dispatch on the arguments (``case "$*" in pattern)``);
- ``in_turn([capture1, capture2])``: the first run with these arguments prints capture1, every
  later one capture2 (a per-argv counter file in the stub directory);
- ``grows(capture, field, by, state_dir)``: print a perfquery capture with one counter raised by
  ``by`` more at every run (a per-stub counter file), so rate() sees it grow;
- ``hangs(mark)``, ``ignores_sigterm(mark)``: never finish (``sleep <mark>``: a number no other
  process uses, so ``processes_with(mark)`` finds strays);
- ``fails(message, rc)``, ``garbage()``, ``binary_junk()``;
- ``StubBin.add(name, body, mode=0o644)``: present on PATH but not executable.
"""

from __future__ import annotations

import itertools
import os
import shlex
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Union

TESTS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO = os.path.dirname(TESTS_DIR)
FIXTURES = os.path.join(TESTS_DIR, "fixtures")

# The utilities the stubs themselves use (cat, sleep, tr, mkdir), found on the PATH the tests
# started with; the stub directory alone is the PATH ibdiag sees.
_SYSTEM_PATH = os.environ.get("PATH", os.defpath)
_MARKS = itertools.count(1)

PathLike = Union[str, "os.PathLike[str]"]


def fixture(*parts: str) -> str:
    """The path of a recorded capture under tests/fixtures; a missing one fails loudly."""
    path = os.path.join(FIXTURES, *parts)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"capture {path} is missing (tests/fixtures)")
    return path


# -- recorded captures the stubs print (see each folder's SOURCES.md) ----------------------------
PERFQUERY_X_HEALTHY = ("perfquery", "infiniband_exporter-x-hca-edr-lid133.txt")
PERFQUERY_X_FAULT = ("perfquery", "infiniband_exporter-x-switch-edr-0x506b4b03005c2740.txt")
PERFQUERY_E = ("perfquery", "infiniband_exporter-E-rcverr-hca-lid133.txt")
ETHTOOL_S = ("ethtool", "ethq-connectx4-mlx5-kernel4.15-ethtool-S-full.txt")
DMESG_PCIE_POWER = (
    "dmesg",
    "gpud-h100-boot-mlx5-insufficient-pcie-power-cable-unplugged-link-down.txt",
)
DMESG_FW_SYNDROME = ("dmesg", "qemu-devel-2025-cx6dx-fw-internal-error-health-miss-count-synd1.txt")

# No `perfquery -X` capture is recorded; this is the shape infiniband-diags prints for it
# (perfquery.c xmt_sl_query: "# PortXmitDataSL counters: %s port %d", then the fields of
# mad_dump_perfcounters_xmt_sl padded with dots to column 33).
PERFQUERY_XMIT_SL = (
    "# PortXmitDataSL counters: Lid 133 port 1\n"
    "PortSelect:......................1\n"
    "CounterSelect:...................0x0000\n"
) + "".join(
    f"XmtDataSL{sl}:{'.' * (23 - len(str(sl)))}{value}\n"
    for sl, value in enumerate([9281738471, 0, 0, 1204877] + [0] * 12)
)


# The far end of a cable (issue 14): the real tools' outputs against the ibsim simulator,
# recorded in tests/captures/ibsim-partner (its SOURCES.md).
PARTNER_CAPTURES = os.path.join(TESTS_DIR, "captures", "ibsim-partner")


def partner_capture(name: str) -> str:
    """The path of a capture in tests/captures/ibsim-partner; a missing one fails loudly."""
    path = os.path.join(PARTNER_CAPTURES, name)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"capture {path} is missing")
    return path


def partner_smpquery(prefix: str = "switch-hdr") -> Dict[str, str]:
    """``by_args`` cases for ``smpquery`` answering the partner chain
    (``ibdiag.families.partner.chain``) with the ``prefix`` captures (``switch-hdr``: a switch,
    ``b2b-ca``: a back-to-back HCA)."""
    return {
        "* nodeinfo 0,1": prints(partner_capture(f"{prefix}-nodeinfo.txt")),
        "* nodedesc 0,1": prints(partner_capture(f"{prefix}-nodedesc.txt")),
        "* portinfo 0,1 0": prints(partner_capture(f"{prefix}-portinfo0.txt")),
        "* portinfo 0,1 *": prints(partner_capture(f"{prefix}-portinfo.txt")),
        "* portinfo 0 *": prints(partner_capture("b2b-ca-portinfo0.txt")),  # our own port
    }


def partner_perfquery(prefix: str = "switch-hdr") -> Dict[str, str]:
    """``by_args`` cases for ``perfquery`` on the partner's LID and port (``-C D -P N -t MS``
    first, as the chain puts them): put them before the local port's cases (``"-C *"`` would
    match these too)."""
    return {
        "-C * -P * -t * -x *": prints(partner_capture(f"{prefix}-perfquery-x.txt")),
        "-C * -P * -t * -E *": prints(partner_capture(f"{prefix}-perfquery-E.txt")),
        "-C * -P * -t *": prints(partner_capture(f"{prefix}-perfquery.txt")),
    }


def marker(seconds: int = 1000) -> str:
    """A sleep duration no other process uses: its argv finds strays in /proc."""
    return f"{seconds}.{os.getpid()}{next(_MARKS):04d}"


def processes_with(mark: str) -> List[str]:
    """Live processes whose command line contains ``mark`` (pgrep -f, without pgrep)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                cmdline = handle.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if mark in cmdline:
            found.append(f"{pid}: {cmdline}")
    return found


def wait_no_strays(mark: str, within: float = 5.0) -> List[str]:
    """SIGKILL is asynchronous: what is still running with ``mark`` after ``within`` seconds."""
    end = time.monotonic() + within
    while processes_with(mark) and time.monotonic() < end:
        time.sleep(0.05)
    return processes_with(mark)


def assert_no_strays(mark: str, within: float = 3.0) -> None:
    """Nothing with ``mark`` in its command line is left ``within`` seconds from now."""
    assert wait_no_strays(mark, within) == []


# -- script bodies -----------------------------------------------------------------------------


def _q(text: PathLike) -> str:
    return shlex.quote(os.fspath(text))


def prints(capture: PathLike, rc: int = 0, delay: float = 0.0, stderr: str = "") -> str:
    """Print the file ``capture`` (after ``delay`` seconds), then ``stderr``, exit ``rc``."""
    body = f"sleep {delay:g}\n" if delay else ""
    body += f"cat {_q(capture)}\n"
    if stderr:
        body += f"printf '%s\\n' {_q(stderr)} >&2\n"
    return body + f"exit {rc}\n"


def grows(capture: PathLike, field: str, by: int, state_dir: PathLike) -> str:
    """Print the perfquery ``capture`` with ``field`` (``SymbolErrorCounter``) raised by ``by``
    x the number of runs so far (``$0``'s counter file in ``state_dir``); exit 0."""
    state = _q(state_dir)
    return (
        f"mkdir -p {state}\n"
        'key=$(basename "$0")-grows\n'
        f'n=$(cat {state}/"$key" 2>/dev/null || echo 0)\n'
        "n=$((n + 1))\n"
        f'echo "$n" > {state}/"$key"\n'
        f"awk -v add=$((n * {int(by)})) -v field={_q(field + ':')} "
        "'index($0, field) == 1 && match($0, /[0-9]+$/) "
        "{ print substr($0, 1, RSTART - 1) (substr($0, RSTART) + add); next } { print }' "
        f"{_q(capture)}\n"
        "exit 0\n"
    )


def prints_text(text: str, rc: int = 0, delay: float = 0.0) -> str:
    """Print ``text`` verbatim (a here-document), exit ``rc``."""
    body = f"sleep {delay:g}\n" if delay else ""
    return body + f"cat <<'STUB_EOF'\n{text.rstrip(chr(10))}\nSTUB_EOF\nexit {rc}\n"


def fails(message: str, rc: int = 1, stdout: str = "") -> str:
    """Print ``message`` on stderr (and ``stdout`` on stdout) and exit ``rc``."""
    body = f"printf '%s\\n' {_q(stdout)}\n" if stdout else ""
    return body + f"printf '%s\\n' {_q(message)} >&2\nexit {rc}\n"


def hangs(mark: str) -> str:
    """Print a line, then never finish (a child ``sleep`` keeps stdout open, too)."""
    return f"echo 'starting...'\nsleep {mark} &\nsleep {mark}\n"


def ignores_sigterm(mark: str) -> str:
    """Ignore SIGTERM (the script and, by inheritance, its children) and never finish."""
    return (
        f"trap '' TERM\necho 'ignoring SIGTERM'\nsleep {mark} &\nwhile :; do sleep {mark}; done\n"
    )


def garbage() -> str:
    """Exit 0 having printed text that is no tool's output (numbers in odd places included)."""
    return (
        "echo 'Segmentation fault? no: just noise'\n"
        "echo '::::....:::: 12 ::: 0x'\n"
        "echo 'PortXmitData:....................not-a-number'\n"
        "echo 'CA mlx5_0 <- not quoted; Port 1: State: ???'\n"
        "echo '} { ] [ %s %d \\\\ $HOME `id`'\n"
        "exit 0\n"
    )


def binary_junk() -> str:
    """Exit 0 having printed NULs, invalid UTF-8, control characters and no newline at the end."""
    return (
        "printf '\\177ELF\\002\\001\\001\\000\\000\\000\\377\\376\\375 '\n"
        "printf 'SymbolErrorCounter:\\000\\000\\377\\033[2J\\r\\b\\200\\201 mlx5_0 \\303\\050'\n"
        "printf '\\377\\376junk on stderr\\000' >&2\n"
        "exit 0\n"
    )


def _glob(pattern: str) -> str:
    """A case pattern: ``*`` stays a wildcard, everything else is quoted (spaces included)."""
    return "*".join(shlex.quote(part) if part else "" for part in pattern.split("*"))


def by_args(cases: Dict[str, str], default: Optional[str] = None) -> str:
    """``case "$*" in PATTERN) BODY;; esac``: patterns are sh globs on the joined arguments."""
    lines = ['case "$*" in']
    for pattern, body in cases.items():
        lines.append(f"{_glob(pattern)})")
        lines.append(body.rstrip("\n"))  # not indented: a here-document's end must start a line
        lines.append("    ;;")
    lines.append("*)")
    fallback = default if default is not None else fails('stub: unexpected arguments: "$*"', 2)
    lines.append(fallback.rstrip("\n"))
    lines.append("    ;;")
    lines.append("esac")
    return "\n".join(lines) + "\n"


def in_turn(first: str, later: str, state_dir: PathLike) -> str:
    """Run the body ``first`` the first time these arguments are seen, ``later`` after that."""
    state = _q(state_dir)
    return (
        f"mkdir -p {state}\n"
        "key=$(printf '%s' \"$0 $*\" | tr -c 'A-Za-z0-9_.' '_')\n"
        f'n=$(cat {state}/"$key" 2>/dev/null || echo 0)\n'
        "n=$((n + 1))\n"
        f'echo "$n" > {state}/"$key"\n'
        'if [ "$n" -le 1 ]; then\n'
        + first.rstrip("\n")
        + "\nelse\n"
        + later.rstrip("\n")
        + "\nfi\n"
    )


class StubBin:
    """A directory of stub executables; ``path`` is the PATH to give ibdiag."""

    def __init__(self, root: PathLike) -> None:
        self.root = Path(root)
        self.bin = self.root / "bin"
        self.bin.mkdir(parents=True, exist_ok=True)
        self.calls_log = self.root / "calls.log"
        self.state = self.root / "state"

    @property
    def path(self) -> str:
        return str(self.bin)

    def add(self, name: str, body: str, mode: int = 0o755) -> Path:
        """Write the stub ``name``: log the call, then ``body`` (sh)."""
        script = self.bin / name
        script.write_text(
            "#!/bin/sh\n"
            f"PATH={_q(_SYSTEM_PATH)}; export PATH\n"
            f'printf \'%s\\n\' "$(basename "$0")${{*:+ $*}}" >> {_q(self.calls_log)}\n' + body
        )
        script.chmod(mode)
        return script

    def calls(self) -> List[str]:
        """Every invocation so far, as "name arg arg ..." lines (order of start)."""
        if not self.calls_log.exists():
            return []
        return self.calls_log.read_text().splitlines()

    def env(self, base: Optional[Dict[str, str]] = None, **extra: str) -> Dict[str, str]:
        """An environment for a subprocess ibdiag: PATH is the stub directory alone."""
        env = dict(os.environ if base is None else base)
        env.update(PATH=self.path, **extra)
        env.pop("IBDIAG_DEBUG", None)
        return env


# -- a node: sysfs tree and procfs -----------------------------------------------------------------


def first_blocks(capture: PathLike, start: str, count: int, dest: PathLike) -> str:
    """Write the first ``count`` blocks of ``capture`` (a block starts with a line beginning
    ``start``, e.g. ``CA '`` for ibstat) to ``dest``: a real listing cut to the node's HCAs."""
    blocks: List[List[str]] = []
    with open(capture, encoding="utf-8") as handle:
        for line in handle:
            if line.startswith(start):
                blocks.append([])
            if blocks:
                blocks[-1].append(line)
    if len(blocks) < count:
        raise ValueError(f"{capture} has {len(blocks)} blocks starting {start!r}, not {count}")
    Path(dest).write_text("".join(line for block in blocks[:count] for line in block))
    return os.fspath(dest)


def write_procfs(
    root: PathLike,
    boot_time: Optional[float] = 1_700_000_000,
    hostname: Optional[str] = "node001",
    boot_id: str = "5d1c7a0e-4f4b-4a55-9c1e-2b6f0e7d9a01",
    modules: Optional[Sequence[str]] = ("mlx5_ib", "mlx5_core", "ib_uverbs", "ib_umad", "ib_core"),
) -> str:
    """A procfs directory with what ibdiag reads: hostname, boot_id, stat (btime), modules.
    ``None`` leaves that file out (no hostname, no stat, no modules: as a container may)."""
    proc = Path(root)
    (proc / "sys" / "kernel" / "random").mkdir(parents=True, exist_ok=True)
    if hostname is not None:
        (proc / "sys" / "kernel" / "hostname").write_text(hostname + "\n")
    (proc / "sys" / "kernel" / "random" / "boot_id").write_text(boot_id + "\n")
    if boot_time is not None:
        (proc / "stat").write_text(
            "cpu  4705 356 584 3699176 3257 0 45 0 0 0\n"
            "cpu0 2399 190 301 1849223 1596 0 37 0 0 0\n"
            "intr 1462898 0 9 0 0 0 0 3 0 1 0\n"
            "ctxt 3018437\n"
            f"btime {int(boot_time)}\n"
            "processes 26442\nprocs_running 1\nprocs_blocked 0\n"
        )
    if modules is not None:
        (proc / "modules").write_text(
            "".join(f"{name} 1 0 - Live 0x0000000000000000\n" for name in modules)
        )
    return str(proc)
