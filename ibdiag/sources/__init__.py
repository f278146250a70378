"""Sources: the only code that touches the machine (sysfs, procfs, and the command families).

``SOURCE_LEVELS`` names every source a check may declare in ``needs`` and the lowest level at
which it is collected: ``quick`` sources read files only and never run a command. The files
are read here; each command family (``ibdiag.families``) declares its own source and level.

The built-in families' levels are also listed in ``BUILTIN_FAMILY_LEVELS``: every run
validates every check's ``needs``, and a quick check (the Slurm prolog) must not import the
families to do so. A test keeps the list equal to what the families declare; a family that is
not in it (a new one, a site's) is found by importing the families, at any level.
"""

from typing import Dict, Iterator, MutableMapping

FILE_SOURCE_LEVELS = {
    "sysfs": "quick",
    "procfs": "quick",
    # the node around the HCAs, from files: NVIDIA GPUs, loaded kernel modules
    "topology": "standard",
    # each port's past (ibdiag.history): the store is read and this run's sample appended
    "history": "quick",
    # the support catalogue's files (ibdiag collect only): cmdline, module parameters, GIDs...
    "support_files": "quick",
}
BUILTIN_FAMILY_LEVELS = {
    # level standard: read-only commands, run concurrently under the run's deadline ...
    "perfquery": "standard",
    "ethtool": "standard",
    "kernel_log": "standard",
    "ibstat": "standard",
    "ibv_devinfo": "standard",
    "gpu_topology": "standard",  # nvidia-smi topo -m
    "lspci": "standard",  # lspci -vvv -s BDF of the bridges between a GPU and its HCA (ACS)
    "devlink_health": "standard",  # devlink -j health show (the firmware reporters)
    # ... and the far end of each cable (smpquery/perfquery over the direct route 0,1)
    "partner": "standard",
    "perfquery_fec": "standard",  # perfquery -T: FEC per lane (issue 24)
    "module": "standard",  # mlxlink/mstlink -m -c --json: BER, optics, cable identity (issue 24)
    # the support catalogue's commands (ibdiag collect only: no check needs them, issue 26)
    "support": "standard",
    # level full: tests that move traffic, after the read-only commands; and NCCL Inspector
    "perftest": "full",
    "nccl_tests": "full",
    "nccl_inspector": "full",
}
# What only a support bundle gathers (``ibdiag collect``: ``PipelineOptions.support``), never a
# check's run nor ``ibdiag snapshot`` of "every source of the level": the support catalogue.
BUNDLE_ONLY = frozenset({"support", "support_files"})


class _SourceLevels(MutableMapping):
    """source -> level: the files' and the built-in families' at no cost, any other family's
    by importing the families (``ibdiag.families.source_levels``). Writable for tests."""

    def __init__(self) -> None:
        self._known: Dict[str, str] = {**FILE_SOURCE_LEVELS, **BUILTIN_FAMILY_LEVELS}

    def _all(self) -> Dict[str, str]:
        from ibdiag.families import source_levels

        return {**source_levels(), **self._known}

    def __getitem__(self, name: str) -> str:
        if name in self._known:
            return self._known[name]
        return self._all()[name]

    def __contains__(self, name: object) -> bool:
        return name in self._known or name in self._all()

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())

    def __setitem__(self, name: str, level: str) -> None:
        self._known[name] = level

    def __delitem__(self, name: str) -> None:
        del self._known[name]


SOURCE_LEVELS: MutableMapping[str, str] = _SourceLevels()
