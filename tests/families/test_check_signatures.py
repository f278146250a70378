"""A check's signature is a contract: refused when the registry loads, never an error per run.

Checks are called ``fn(snapshot, thresholds)``, or ``fn(snapshot, thresholds, baseline)`` when
they take a third positional parameter. Whatever that call works with loads (any parameter
names, ``*args``/``**kwargs``, extra parameters with defaults); anything else is one
RegistryError naming the file or entry point, the check and the function - so ``ibdiag checks``
and ``ibdiag check`` exit 3 with one line instead of listing a check that errors on every node.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import Iterator

import pytest
from conftest import SCENARIOS_DIR
from snapshots import devices, snapshot

from ibdiag.grade import run_check
from ibdiag.model import Status
from ibdiag.registry import RegistryError, load_registry
from ibdiag.thresholds import Thresholds

GOOD = f"{SCENARIOS_DIR}/gcm-8xCX6-HDR-good/root/sys"
HEADER = """\
import functools

from ibdiag.model import Result, Status
from ibdiag.registry import check


def said(*args, **kwargs):
    # what the check was called with, as one pass Result
    names = [type(arg).__name__ for arg in args]
    names += [f"{key}={type(value).__name__}" for key, value in sorted(kwargs.items())]
    return [Result(target="node", status=Status.PASS, message=",".join(names))]


"""


def dropin(directory: Path, body: str, name: str = "site.py") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(HEADER + textwrap.dedent(body), encoding="utf-8")
    return path


def load(directory: Path):
    return load_registry([str(directory)], entry_points=False, builtins=False)


def refusal(directory: Path) -> str:
    with pytest.raises(RegistryError) as caught:
        load(directory)
    message = str(caught.value)
    assert "\n" not in message, message
    return message


def said_by(spec, baseline=None) -> str:
    """Run the check as grade does; the message says which arguments it was given."""
    (result,) = run_check(spec, snapshot(devices(1)), Thresholds(), baseline)
    assert result.status == Status.PASS, result.message
    return result.message


def check_source(params: str) -> str:
    """One drop-in check ``site.mtu``, function ``ipoib_mtu(params)``, saying what it was given
    (its parameters' values; those named ``_x`` are left out)."""
    return f'''
        @check("site.mtu", title="IPoIB MTU")
        def ipoib_mtu{params}:
            """Healthy: the IPoIB MTU is 4092."""
            given = dict(locals())
            return said(*[value for key, value in given.items() if not key.startswith("_")])
    '''


# --- what loads: every signature the call works with ---------------------------------------


@pytest.mark.parametrize(
    ("params", "without_baseline", "with_baseline"),
    [
        ("(snap, th)", "Snapshot,Thresholds", "Snapshot,Thresholds"),
        ("(snapshot, thresholds)", "Snapshot,Thresholds", "Snapshot,Thresholds"),
        ("(s, t, /)", "Snapshot,Thresholds", "Snapshot,Thresholds"),
        ("(snap, th, baseline)", "Snapshot,Thresholds,NoneType", "Snapshot,Thresholds,Snapshot"),
        (
            "(snap, th, baseline=None)",
            "Snapshot,Thresholds,NoneType",
            "Snapshot,Thresholds,Snapshot",
        ),
        (
            "(snap, th, before, _n=1)",
            "Snapshot,Thresholds,NoneType",
            "Snapshot,Thresholds,Snapshot",
        ),
        ("(snap, th, *, _verbose=False)", "Snapshot,Thresholds", "Snapshot,Thresholds"),
        ("(snap, th=None)", "Snapshot,Thresholds", "Snapshot,Thresholds"),
    ],
)
def test_signatures_the_call_works_with_load_and_run(
    tmp_path: Path, params: str, without_baseline: str, with_baseline: str
) -> None:
    dropin(tmp_path, check_source(params))
    spec = load(tmp_path).get("site.mtu")
    assert spec is not None
    assert said_by(spec) == without_baseline
    assert said_by(spec, snapshot(devices(1))) == with_baseline


@pytest.mark.parametrize(
    ("params", "call"),
    [
        ("(*args)", "said(*args)"),
        ("(*args, **kwargs)", "said(*args, **kwargs)"),
        ("(snap, *rest)", "said(snap, *rest)"),
        ("(snap, th, **kwargs)", "said(snap, th, **kwargs)"),
    ],
)
def test_var_positional_checks_load_and_get_snapshot_and_thresholds(
    tmp_path: Path, params: str, call: str
) -> None:
    dropin(
        tmp_path,
        f'''
        @check("site.mtu", title="IPoIB MTU")
        def ipoib_mtu{params}:
            """Healthy: the IPoIB MTU is 4092."""
            return {call}
        ''',
    )
    spec = load(tmp_path).get("site.mtu")
    assert spec is not None
    assert said_by(spec) == "Snapshot,Thresholds"
    assert said_by(spec, snapshot(devices(1))) == "Snapshot,Thresholds"


# --- what is refused, naming the file, the check and the function -------------------------


@pytest.mark.parametrize(
    ("params", "shown", "call"),
    [
        ("(snap)", "(snap)", "fn(snapshot, thresholds)"),
        ("()", "()", "fn(snapshot, thresholds)"),
        ("(snap, th, baseline, extra)", "(snap, th, baseline, extra)", "fn(snapshot, thresholds"),
        ("(snap, th, *, site)", "(snap, th, *, site)", "fn(snapshot, thresholds)"),
        ("(**kwargs)", "(**kwargs)", "fn(snapshot, thresholds)"),
        ("(snap: 'Snapshot') -> list", "(snap)", "fn(snapshot, thresholds)"),
    ],
)
def test_a_signature_the_call_cannot_work_with_is_refused_naming_file_and_function(
    tmp_path: Path, params: str, shown: str, call: str
) -> None:
    path = dropin(
        tmp_path,
        f'''
        @check("site.mtu", title="IPoIB MTU")
        def ipoib_mtu{params}:
            """Healthy: the IPoIB MTU is 4092."""
            return []
        ''',
    )
    message = refusal(tmp_path)
    assert message.startswith(f"check 'site.mtu' in {path}: function ipoib_mtu takes {shown} ")
    assert f"but checks are called as {call}" in message


def test_an_async_check_is_refused(tmp_path: Path) -> None:
    path = dropin(
        tmp_path,
        '''
        @check("site.mtu", title="IPoIB MTU")
        async def ipoib_mtu(snap, th):
            """Healthy: the IPoIB MTU is 4092."""
            return []
        ''',
    )
    message = refusal(tmp_path)
    assert message.startswith(f"check 'site.mtu' in {path}: function ipoib_mtu is async")


# --- functools.wraps: the wrapper is what is called -----------------------------------------

WRAPPER = '''
    def {decorator}(func):
        @functools.wraps(func)
        def wrapper{params}:
            return {call}

        return wrapper


    @check("site.mtu", title="IPoIB MTU")
    @{decorator}
    def ipoib_mtu{inner}:
        """Healthy: the IPoIB MTU is 4092."""
        return said({inner_args})
'''


def wrapped(params: str, call: str, inner: str, inner_args: str, decorator: str = "logged"):
    return WRAPPER.format(
        decorator=decorator, params=params, call=call, inner=inner, inner_args=inner_args
    )


def test_a_wrapper_taking_only_snap_is_refused_though_the_wrapped_function_fits(
    tmp_path: Path,
) -> None:
    # inspect.signature follows __wrapped__ and would report (snap, th): the wrong function
    path = dropin(tmp_path, wrapped("(snap)", "func(snap, None)", "(snap, th)", "snap, th"))
    message = refusal(tmp_path)
    assert message.startswith(f"check 'site.mtu' in {path}: function ipoib_mtu takes (snap) ")
    assert "but checks are called as fn(snapshot, thresholds)" in message
    assert "wrapper" in message
    assert "(snap, th)" in message  # what the wrapped function takes, to tell them apart


@pytest.mark.parametrize("params", ["(*args, **kwargs)", "(*args)", "(snap, th, *rest)"])
def test_a_wrapper_that_passes_everything_through_loads_and_runs(
    tmp_path: Path, params: str
) -> None:
    call = "func(*args, **kwargs)" if "kwargs" in params else "func(*args)"
    call = "func(snap, th, *rest)" if params.startswith("(snap") else call
    dropin(tmp_path, wrapped(params, call, "(snap, th)", "snap, th"))
    spec = load(tmp_path).get("site.mtu")
    assert spec is not None
    assert said_by(spec) == "Snapshot,Thresholds"
    assert said_by(spec, snapshot(devices(1))) == "Snapshot,Thresholds"


def test_a_pass_through_wrapper_of_a_baseline_check_passes_the_baseline(tmp_path: Path) -> None:
    # The wrapper (*args, **kwargs) says nothing about a baseline; the function it wraps does.
    dropin(tmp_path, wrapped("(*args, **kwargs)", "func(*args, **kwargs)", "(s, t, b)", "s, t, b"))
    spec = load(tmp_path).get("site.mtu")
    assert spec is not None
    assert said_by(spec) == "Snapshot,Thresholds,NoneType"
    assert said_by(spec, snapshot(devices(1))) == "Snapshot,Thresholds,Snapshot"


def test_a_two_parameter_wrapper_of_a_baseline_check_is_not_given_a_baseline(
    tmp_path: Path,
) -> None:
    # The wrapper's own parameters decide: (snap, th) is called with two arguments.
    dropin(tmp_path, wrapped("(snap, th)", "func(snap, th, None)", "(s, t, b)", "s, t, b"))
    spec = load(tmp_path).get("site.mtu")
    assert spec is not None
    assert said_by(spec, snapshot(devices(1))) == "Snapshot,Thresholds,NoneType"


# --- through the command line: one line, exit 3 -----------------------------------------------


@pytest.mark.parametrize("command", [["checks"], ["check", "--sysfs", GOOD]])
def test_cli_refuses_a_dropin_with_a_wrong_signature_in_one_line(
    run_cli, tmp_path: Path, command
) -> None:
    path = dropin(
        tmp_path,
        '''
        @check("site.mtu", title="IPoIB MTU")
        def ipoib_mtu(snap):
            """Healthy: the IPoIB MTU is 4092."""
            return []
        ''',
    )
    result = run_cli(*command, "--checks-dir", str(tmp_path))
    assert result.exit_code == 3, result.stdout
    assert result.stdout == ""
    assert result.stderr == (
        f"ibdiag: error: check 'site.mtu' in {path}: function ipoib_mtu takes (snap) "
        "but checks are called as fn(snapshot, thresholds)\n"
    )


def test_cli_runs_a_pass_through_wrapper_of_a_baseline_check(run_cli, tmp_path: Path) -> None:
    dropin(tmp_path, wrapped("(*args, **kwargs)", "func(*args, **kwargs)", "(s, t, b)", "s, t, b"))
    listed = run_cli("checks", "--checks-dir", str(tmp_path))
    assert listed.exit_code == 0, listed.stderr
    assert "site.mtu" in listed.stdout
    result = run_cli("check", "--sysfs", GOOD, "--checks-dir", str(tmp_path), "--verbose")
    assert result.exit_code == 0, result.stdout + result.stderr
    assert "Snapshot,Thresholds,NoneType" in result.stdout


# --- an entry point is refused the same way, naming the entry point --------------------------


@pytest.fixture()
def plugin_site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A site-packages holding one distribution with an ``ibdiag.checks`` entry point."""
    site = tmp_path / "site-packages"
    info = site / "mtu_checks-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mtu_checks\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[ibdiag.checks]\nmtu = mtu_checks_zz\n")
    monkeypatch.syspath_prepend(str(site))
    yield site
    sys.modules.pop("mtu_checks_zz", None)


def test_an_entry_point_with_a_wrong_signature_is_refused_naming_it(
    plugin_site: Path, run_cli
) -> None:
    (plugin_site / "mtu_checks_zz.py").write_text(
        HEADER
        + textwrap.dedent(
            '''
            @check("site.mtu", title="IPoIB MTU")
            def ipoib_mtu(snap):
                """Healthy: the IPoIB MTU is 4092."""
                return []
            '''
        ),
        encoding="utf-8",
    )
    with pytest.raises(RegistryError) as caught:
        load_registry(builtins=False)
    assert str(caught.value) == (
        "check 'site.mtu' in entry point 'mtu' (mtu_checks_zz): function ipoib_mtu takes (snap) "
        "but checks are called as fn(snapshot, thresholds)"
    )
    result = run_cli("checks")
    assert result.exit_code == 3
    assert result.stderr == f"ibdiag: error: {caught.value}\n"


def test_an_entry_point_with_a_good_wrapper_loads(plugin_site: Path) -> None:
    source = wrapped("(*args, **kwargs)", "func(*args, **kwargs)", "(snap, th)", "snap, th")
    (plugin_site / "mtu_checks_zz.py").write_text(HEADER + textwrap.dedent(source))
    spec = load_registry(builtins=False).get("site.mtu")
    assert spec is not None
    assert said_by(spec) == "Snapshot,Thresholds"
