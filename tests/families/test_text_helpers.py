"""The helpers every command-output parser shares (ibdiag.families._text)."""

from __future__ import annotations

import re

import pytest

from ibdiag.families._text import (
    FLOAT,
    IB_TOOL_ERROR,
    NOT_STARTED,
    numbered_lines,
    output_lines,
)


def test_numbered_lines_skip_blanks_but_keep_the_real_line_numbers():
    text = b"  first \n\n\t\nsecond\r\n   \nthird"
    assert list(numbered_lines(text)) == [(1, "first"), (4, "second"), (6, "third")]


@pytest.mark.parametrize("nothing", [None, "", b"", "\n \n\t"])
def test_numbered_lines_of_nothing_is_nothing(nothing):
    assert list(numbered_lines(nothing)) == []


def test_output_lines_set_the_tools_error_lines_apart():
    text = (
        "# Port counters: Lid 1 port 1\n"
        "ibwarn: [12] mad_rpc: _do_madrpc failed\n"
        "SymbolErrorCounter:....3\n"
    )
    errors: list = []
    lines = list(output_lines(text, IB_TOOL_ERROR, errors))
    assert lines == [(1, "# Port counters: Lid 1 port 1"), (3, "SymbolErrorCounter:....3")]
    assert errors == ["ibwarn: [12] mad_rpc: _do_madrpc failed"]


def test_output_lines_trim_a_long_error_line():
    errors: list = []
    assert list(output_lines("iberror: " + "x" * 500, IB_TOOL_ERROR, errors)) == []
    assert len(errors) == 1 and errors[0].endswith("...") and len(errors[0]) < 210


@pytest.mark.parametrize("text", ["12", "-3.5", "+.5", "1.", "1.2e+03", "6E-9"])
def test_float_matches_what_printf_prints(text):
    assert re.fullmatch(FLOAT, text)


@pytest.mark.parametrize("text", ["", ".", "e5", "1e", "1.2.3", "0x10", "nan", "12 GB"])
def test_float_rejects_what_is_not_one_number(text):
    assert not re.fullmatch(FLOAT, text)


@pytest.mark.parametrize(
    "line",
    [
        "bash: all_reduce_perf: command not found",
        "mpirun: /opt/nccl-tests/build/all_reduce_perf: No such file or directory",
        "all_reduce_perf: error while loading shared libraries: libnccl.so.2: cannot open "
        "shared object file: No such file or directory",
    ],
)
def test_not_started_knows_the_shell_and_the_loader(line):
    assert re.search(NOT_STARTED, line)


def test_not_started_is_not_any_failure():
    assert not re.search(NOT_STARTED, "NCCL WARN NET/IB : Got completion with error 12")
