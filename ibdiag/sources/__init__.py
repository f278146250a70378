"""Sources: the only code that touches the machine (sysfs, procfs, and later commands).

``SOURCE_LEVELS`` names every source a check may declare in ``needs`` and the lowest level at
which it is collected: ``quick`` sources read files only and never run a command.
"""

SOURCE_LEVELS = {
    "sysfs": "quick",
    "procfs": "quick",
    # level standard: read-only commands, run concurrently under the run's deadline ...
    "perfquery": "standard",
    "ethtool": "standard",
    "kernel_log": "standard",
    "ibstat": "standard",
    "ibv_devinfo": "standard",
    # ... and the node around the HCAs, from files: NVIDIA GPUs, loaded kernel modules
    "topology": "standard",
    "gpu_topology": "standard",  # nvidia-smi topo -m
    # ... and the far end of each cable (smpquery/perfquery over the direct route 0,1)
    "partner": "standard",
    # level full: tests that move traffic, after the read-only commands; and NCCL Inspector
    "perftest": "full",
    "nccl_tests": "full",
    "nccl_inspector": "full",
}
COMMAND_SOURCES = frozenset(
    {"perfquery", "ethtool", "kernel_log", "ibstat", "ibv_devinfo", "gpu_topology", "partner"}
)
ACTIVE_SOURCES = frozenset({"perftest", "nccl_tests"})
