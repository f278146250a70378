"""The InfiniBand driver stack's versions, from ``/sys/module/<module>/version``.

A fleet is healthy when every node runs the same driver build: a node left on another MLNX_OFED
/ DOCA-OFED release (or on the distribution's inbox driver) after a rolling upgrade behaves
differently under load, and ``ibdiag fleet report`` names it (drift). MLNX_OFED and DOCA-OFED
modules carry ``version`` (``24.10-1.1.4``); inbox modules usually do not, and then the
module's ``srcversion`` (a hash of its sources, the same for the same build) stands in, written
``srcversion:<hash>``. A module that is not loaded has no entry; a file that exists but cannot
be read is a problem, as everywhere.
"""

from typing import Dict

from ibdiag.model import Problems
from ibdiag.sources.names import shown
from ibdiag.sources.sysfs import SysfsReader

# The modules whose build decides how the fabric behaves: the HCA driver, the IB core and the
# user-space access paths (verbs, MADs), and GPUDirect RDMA's bridge.
DRIVER_MODULES = ("mlx5_core", "mlx5_ib", "ib_core", "ib_uverbs", "ib_umad", "nvidia_peermem")
EMPTY = "empty"  # SysfsReader's word for a file with nothing in it
VERSION_MAX = 64  # a version string longer than this is not one: kept cut, control bytes escaped


def read_driver_versions(reader: SysfsReader, problems: Problems) -> Dict[str, str]:
    """Module name -> its version (or ``srcversion:<hash>``), for each loaded module of
    ``DRIVER_MODULES`` that says one."""
    versions: Dict[str, str] = {}
    for module in DRIVER_MODULES:
        for attribute, prefix in (("version", ""), ("srcversion", "srcversion:")):
            rel = f"module/{module}/{attribute}"
            if not reader.exists(rel):
                continue
            text, problem = reader.read_text(rel)
            if problem == EMPTY:
                continue  # says nothing: its srcversion may
            if problem is not None:
                problems[rel] = problem
                break
            value = shown((text or "").strip()[:VERSION_MAX])
            if value:
                versions[module] = prefix + value
                break
    return versions
