"""A port's partition key table, as the kernel shows it in sysfs ``ports/<n>/pkeys/<index>``.

The subnet manager writes each port's table (opensm from its partitions file, UFM from its
configuration); the kernel reads it back from the HCA (``ib_query_pkey``) and shows one file
per entry, ``0x0000`` for an empty slot. A key is 16 bits: the low 15 name the partition, the
high bit is the membership - ``0xffff`` is a full member of the default partition, ``0x7fff``
a limited one, ``0x8001`` a full member of partition 1 (Azure's style). Two limited members of
one partition cannot talk to each other; a port whose table lacks the job's partition cannot
talk to it at all, however ACTIVE its link: NCCL's queue pairs fail to connect or hang.

Healthy: every InfiniBand port holds the partitions the site expects (``expect_pkeys``), and
the node's InfiniBand ports hold the same ones.
"""

from typing import ClassVar, List, Optional

from pydantic import Field

from ibdiag.facts._base import Fact

FULL_MEMBER = 0x8000


def pkey_text(value: int) -> str:
    """A key as the kernel and opensm write it: ``0x8001``."""
    return f"0x{value:04x}"


def partition_of(value: int) -> int:
    """The partition a key names (its low 15 bits): 0x8001 and 0x0001 are both partition 1."""
    return value & ~FULL_MEMBER & 0xFFFF


class PKeyEntry(Fact):
    """One non-empty slot of the table: its index (what ``NCCL_IB_PKEY`` names) and key."""

    index: int
    value: int  # 16 bits

    @property
    def text(self) -> str:
        return pkey_text(self.value)

    @property
    def full_member(self) -> bool:
        return bool(self.value & FULL_MEMBER)


class PKeyTable(Fact, fact_name="pkeys"):
    """The port's partition keys (``Port.facts["pkeys"]``), read at level quick.

    ``size``: how many slots the table lists (128 on mlx5 and mlx4 InfiniBand ports, 1 on
    RoCE); ``keys``: the non-empty ones, in index order; ``problems``: each slot that could not
    be read or was not a 16-bit hex number (``"pkeys/5: unreadable: Input/output error"``), and
    the listing's own problem. A port without a ``pkeys`` directory has no fact at all.
    """

    FROM_FILES: ClassVar[bool] = True  # read from sysfs: kept when runs are reinterpreted

    size: int = 0
    keys: List[PKeyEntry] = Field(default_factory=list)
    problems: List[str] = Field(default_factory=list)

    def entry(self, value: int) -> Optional[PKeyEntry]:
        """The slot holding exactly ``value`` (membership included), or None."""
        return next((key for key in self.keys if key.value == value), None)

    def of_partition(self, value: int) -> Optional[PKeyEntry]:
        """A slot of the partition ``value`` names, whatever its membership, or None."""
        wanted = partition_of(value)
        return next((key for key in self.keys if partition_of(key.value) == wanted), None)

    def texts(self) -> List[str]:
        """The keys as text, in index order: ``["0xffff", "0x8001"]``."""
        return [key.text for key in self.keys]
