"""The support bundle's catalogue: what ``ibdiag collect`` gathers for a vendor beyond what
the checks read, and what it never runs (``catalogue.toml`` beside this module: data, with its
format in its header).

Each item is one of four kinds: a ``command`` run once per target (``per``) through the one
runner, ``files`` read beside sysfs and procfs, a ``family`` of ibdiag's own that the checks
run already, or ``never`` (with why). ``load()`` reads and validates it once; a bad catalogue
(a duplicate id, an item of two kinds, a placeholder its ``per`` cannot fill) is a
``CatalogueError`` naming the item, found by the tests, never at a node.
"""

from __future__ import annotations

import os
import re
import sys
from functools import cache
from typing import Dict, List, Literal, Optional, Tuple

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.9/3.10
    import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]

CATALOGUE_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "catalogue.toml")

Per = Literal[
    "node", "hca", "pcie_path", "netdev", "ethernet_netdev", "active_ib_port", "gpus"
]  # fmt: skip
Kind = Literal["command", "files", "family", "never"]
ROOTS = ("sys", "proc", "rootfs")  # the trees a file item reads: --sysfs, --procfs, --rootfs
REDACT_KINDS = ("hostnames", "ips", "guids", "macs", "serials", "users", "paths")

# What each ``per`` fills in an argv: a placeholder it does not fill is an error.
PLACEHOLDERS: Dict[str, Tuple[str, ...]] = {
    "node": (),
    "gpus": (),
    "hca": ("bdf", "hca"),
    "pcie_path": ("bdf",),
    "netdev": ("netdev",),
    "ethernet_netdev": ("netdev",),
    "active_ib_port": ("hca", "port"),
}
_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")


class CatalogueError(Exception):
    """The catalogue is not valid (the message names the item)."""


class Item(BaseModel):
    """One thing a support engineer asks for (see ``catalogue.toml``'s header)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    what: str = Field(min_length=1)
    why: str = Field(min_length=1)
    sysinfo_snapshot: str  # the anchors' names for it ("": they do not gather it)
    sos: str
    command: Optional[List[str]] = None
    fallback: Optional[List[str]] = None
    per: Optional[Per] = None
    timeout_s: Optional[float] = Field(default=None, gt=0, le=60)
    root: bool = False
    partial_output: bool = False
    files: Optional[List[str]] = None
    gid_attrs: bool = False
    family: Optional[str] = None
    never: Optional[str] = None
    redact: List[str] = Field(default_factory=list)

    @field_validator("redact")
    @classmethod
    def _known_kinds(cls, kinds: List[str]) -> List[str]:
        unknown = [kind for kind in kinds if kind not in REDACT_KINDS]
        if unknown:
            raise ValueError(f"unknown redaction kind(s) {', '.join(unknown)}")
        return kinds

    @property
    def kind(self) -> Kind:
        if self.command is not None:
            return "command"
        if self.files is not None:
            return "files"
        return "family" if self.family is not None else "never"

    def argv(self, fill: Dict[str, str], fallback: bool = False) -> List[str]:
        """The command (or its fallback) with the target's placeholders filled."""
        template = (self.fallback if fallback else self.command) or []
        return [_PLACEHOLDER.sub(lambda m: fill[m.group(1)], arg) for arg in template]

    def paths(self) -> List[Tuple[str, str]]:
        """Each file pattern as (root, relative pattern): ``("sys", "module/x/parameters/*")``."""
        return [tuple(pattern.split(":", 1)) for pattern in self.files or []]  # type: ignore[misc]

    def problems(self) -> List[str]:
        """What makes this item unusable (a validated model can still be inconsistent)."""
        kinds = [k for k in ("command", "files", "family", "never") if getattr(self, k) is not None]
        if len(kinds) != 1:
            return [f"has {' and '.join(kinds) or 'none'} of command/files/family/never: one"]
        found = []
        if self.command is not None:
            if not self.command or self.per is None or self.timeout_s is None:
                found.append("a command needs a non-empty argv, per and timeout_s")
            filled = set(PLACEHOLDERS.get(self.per or "node", ()))
            for template in (self.command, self.fallback or []):
                used = {m for arg in template for m in _PLACEHOLDER.findall(arg)}
                if used - filled:
                    found.append(f"per {self.per} fills no {', '.join(sorted(used - filled))}")
        elif self.fallback or self.per or self.timeout_s or self.root or self.partial_output:
            found.append("fallback, per, timeout_s, root and partial_output belong to a command")
        for root, _, rel in (p.partition(":") for p in self.files or []):
            if root not in ROOTS or not rel or rel.startswith("/") or ".." in rel.split("/"):
                found.append(f"file {root}:{rel}: give sys:, proc: or rootfs: and a relative path")
        if self.gid_attrs and self.files is None:
            found.append("gid_attrs belongs to files")
        return found


class Catalogue(BaseModel):
    """Every item, in the catalogue's order."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    item: List[Item]

    def of_kind(self, kind: Kind) -> List[Item]:
        return [item for item in self.item if item.kind == kind]

    def get(self, item_id: str) -> Optional[Item]:
        return next((item for item in self.item if item.id == item_id), None)

    def text(self) -> str:
        """The catalogue for a person (``ibdiag collect --list``): each item, what it runs or
        reads (or why it never runs), and why a vendor asks for it."""
        heads = {
            "command": "Commands (level standard; each under its timeout, all inside --deadline)",
            "files": "Files (every level; under --sysfs, --procfs, --rootfs)",
            "family": "Collected for the checks already (their runs are in the bundle)",
            "never": "Never run by default",
        }
        lines: List[str] = []
        for kind, head in heads.items():
            lines += [head, "-" * len(head)]
            for item in self.of_kind(kind):  # type: ignore[arg-type]
                if item.command is not None:
                    how = " ".join(item.command) + f"  [per {item.per}, {item.timeout_s:g} s"
                    how += ", root]" if item.root else "]"
                elif item.files is not None:
                    how = ", ".join(item.files)
                elif item.family is not None:
                    how = f"{item.what}  [family {item.family}]"
                else:
                    how = f"{item.what}  [{item.never}]"
                lines.append(f"{item.id:<22} {how}")
                lines.append(f"{'':<22} why: {item.why}")
            lines.append("")
        return "\n".join(lines)


def parse(text: str, source: str = "catalogue.toml") -> Catalogue:
    """The catalogue ``text`` holds, validated; a ``CatalogueError`` naming what is wrong."""
    try:
        catalogue = Catalogue.model_validate(tomllib.loads(text))
    except tomllib.TOMLDecodeError as exc:
        raise CatalogueError(f"{source}: not TOML: {exc}") from exc
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise CatalogueError(f"{source}: {where}: {first['msg']}") from exc
    seen: Dict[str, int] = {}
    for item in catalogue.item:
        if item.id in seen:
            raise CatalogueError(f"{source}: item {item.id} is listed twice")
        seen[item.id] = 1
        problems = item.problems()
        if problems:
            raise CatalogueError(f"{source}: item {item.id}: {'; '.join(problems)}")
    return catalogue


@cache
def load() -> Catalogue:
    """The shipped catalogue (read once)."""
    with open(CATALOGUE_FILE, encoding="utf-8") as handle:
        return parse(handle.read(), CATALOGUE_FILE)
