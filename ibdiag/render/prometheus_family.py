"""What a Prometheus family writer looks like to the modules that add families to the
exposition (``prometheus_phy``, ``_history``, ``_config``, ``_pci``, ``_fw``, ``_mtu``):
``family(name, kind, help)`` gives a family (``prometheus._Exposition.family``), and each
``add(labels, value)`` on it is one sample. Typing only: nothing here runs."""

from __future__ import annotations

from typing import Callable, Protocol, Tuple

Labels = Tuple[Tuple[str, str], ...]


class Samples(Protocol):
    """A metric family being written: one sample per ``add``."""

    def add(self, labels: Labels, value: float) -> None: ...


Family = Callable[[str, str, str], Samples]
