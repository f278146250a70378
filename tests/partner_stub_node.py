"""A node whose far ends answer through stub ``smpquery``/``perfquery`` (the ibsim captures):
three HCAs, mlx5_0 cabled to the switch leaf07 port 1 (with errors), mlx5_1 back to back with
another HCA, mlx5_2 down. ``SWITCH``: the labels of mlx5_0's far-end samples."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Dict, Tuple

import stubs as S
from sysfs_builder import mlx5_node, write_node

SWITCH = {
    "device": "mlx5_0",
    "port": "1",
    "ib_port": "mlx5_0:1",
    "peer_guid": "0x0000000000200000",
    "peer_name": "leaf07",
    "peer_port": "1",
}


def device_cases(device: str, cases: Dict[str, str]) -> Dict[str, str]:
    """``stubs.partner_smpquery``/``partner_perfquery`` cases narrowed to ``-C device``."""
    narrowed = {}
    for pattern, body in cases.items():
        if pattern.startswith("-C * "):
            narrowed[f"-C {device} {pattern[len('-C * ') :]}"] = body
        else:
            narrowed[f"-C {device} {pattern}"] = body
    return narrowed


def partner_tools(tmp_path: Path) -> Tuple[str, str, S.StubBin]:
    """(sysfs root, procfs root, stubs) of three HCAs: mlx5_0 to leaf07/1 (with errors),
    mlx5_1 back to back, mlx5_2 down."""
    hcas = mlx5_node(3)
    hcas[2].ports[0].state = "1: DOWN"
    hcas[2].ports[0].phys_state = "2: Polling"
    sysfs = str(tmp_path / "sys")
    write_node(sysfs, hcas)
    procfs = S.write_procfs(tmp_path / "proc", boot_time=time.time() - 3600)
    stub = S.StubBin(tmp_path / "stubs")
    text = Path(S.partner_capture("switch-hdr-errors-perfquery.txt")).read_text()
    assert "PortRcvErrors:...................0\n" in text
    errors_file = tmp_path / "switch-errors-perfquery.txt"
    errors_file.write_text(text.replace("PortRcvErrors:...................0\n",
                                        "PortRcvErrors:...................5\n"))  # fmt: skip
    errors = S.prints(str(errors_file))
    switch_perf = {**S.partner_perfquery("switch-hdr"), "-C * -P * -t *": errors}
    stub.add(
        "smpquery",
        S.by_args(
            {
                **device_cases("mlx5_0", S.partner_smpquery("switch-hdr")),
                **device_cases("mlx5_1", S.partner_smpquery("b2b-ca")),
            }
        ),
    )
    stub.add(
        "perfquery",
        S.by_args(
            {
                **device_cases("mlx5_0", switch_perf),
                **device_cases("mlx5_1", S.partner_perfquery("b2b-ca")),
            }
        ),
    )
    return sysfs, procfs, stub
