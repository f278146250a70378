"""The lspci family's ACS parser on real captures (tests/captures/lspci, tests/fixtures/lspci)
and on what a run can give: denied, empty, not installed."""

from __future__ import annotations

import os

from conftest import FIXTURES_DIR, TESTS_DIR

from ibdiag.families import Runs, lspci
from ibdiag.model import CommandRun

CAPTURES = os.path.join(TESTS_DIR, "captures", "lspci")


def _read(*parts: str) -> str:
    with open(os.path.join(*parts), encoding="utf-8") as handle:
        return handle.read()


def test_a_switch_downstream_port_with_acs_redirect_on():
    text = _read(CAPTURES, "kvm-2023-amd-matisse-switch-downstream-acs-redirect.txt")
    denied, has_acs, bits, problems = lspci.parse(text)
    assert (denied, has_acs, problems) == (False, True, [])
    assert bits == {
        "SrcValid": True, "TransBlk": False, "ReqRedir": True, "CmpltRedir": True,
        "UpstreamFwd": True, "EgressCtrl": False, "DirectTrans": False,
    }  # fmt: skip


def test_access_denied_cannot_tell():
    text = _read(CAPTURES, "kvm-2023-amd-matisse-gpp-bridge-access-denied.txt")
    assert lspci.parse(text) == (True, None, {}, [])


def test_the_gpud_h100_capture_acs_off_on_the_first_function_with_acs():
    text = _read(FIXTURES_DIR, "lspci", "gpud-h100-lspci-vvv-mellanox-8xcx7-2xcx6dx-blocks.txt")
    block = text.split("\n\n")[1]  # 1b:00.0 ConnectX-6 Dx: ACSCtl all off
    denied, has_acs, bits, _ = lspci.parse(block)
    assert not denied and has_acs and bits and not any(bits.values())
    first = text.split("\n\n")[0]  # 1a:00.0 ConnectX-7: no ACS capability
    assert lspci.parse(first)[1] is False


def test_a_garbled_flag_is_a_problem_and_the_rest_is_read():
    _denied, _has_acs, bits, problems = lspci.parse("\t\tACSCtl:\tSrcValid? ReqRedir+\n")
    assert bits == {"ReqRedir": True} and problems == ["ACSCtl: not a flag: 'SrcValid?'"]


def _run(bdf, stdout="", rc=0, error=None):
    return CommandRun(
        argv=["lspci", "-vvv", "-s", bdf], rc=rc, stdout=stdout, stderr="",
        duration_s=0.01, error=error, role=lspci.role(bdf),
    )  # fmt: skip


def test_interpret_keeps_each_bridge_with_its_outcome(tmp_path):
    text = _read(CAPTURES, "kvm-2023-amd-matisse-switch-downstream-acs-redirect.txt")
    runs = {
        "a": _run("0000:03:02.0", text),
        "b": _run("0000:03:05.0", ""),
        "c": _run("0000:04:00.0", rc=None, error="not-installed"),
    }
    update = lspci.interpret(None, Runs({k: v for k, v in runs.items()}))  # type: ignore[arg-type]
    found = update.node["facts"]["lspci_acs"].bridges
    assert found["0000:03:02.0"].redirects() == ["SrcValid", "ReqRedir", "CmpltRedir"]
    assert found["0000:03:05.0"].outcome.no_data is not None
    assert found["0000:04:00.0"].outcome.no_data is not None
