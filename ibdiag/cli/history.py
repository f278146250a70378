"""``ibdiag history``: each port's outages as the store holds them, and ``history clear``.

``ibdiag history [--port mlx5_3:1] [--since 24h] [--json]`` prints the timeline: when each port
went down, when it came back, for how long, and what saw it. ``ibdiag history clear --port
mlx5_3:1 --reason TEXT`` writes an operator's tombstone (who, when, why): the outages before it
no longer count for link.flaps and link.drop.
"""

from __future__ import annotations

import getpass
import json
import os
import re
from datetime import datetime, timedelta, timezone
from typing import Dict, List, Optional, Set, Tuple

import click

from ibdiag.cli.options import UsageFailure, history_options
from ibdiag.durations import parse_span, span
from ibdiag.facts.history import guid_key

_PORT = re.compile(r"^(?P<name>[^:\s]+)(?::(?P<port>\d{1,3}))?$")
_GUID_PORT = re.compile(r"^(?P<guid>0x[0-9a-fA-F]{1,16}|name:\S+?)/(?P<port>\d{1,3})$")


def _since(text: str) -> float:
    seconds = parse_span(text)
    if seconds is None:
        raise UsageFailure(f"--since: expected a duration like 24h, 30m or 7d, got {text!r}")
    return seconds


def _open(path: Optional[str], off: bool):
    from ibdiag.history import store_path
    from ibdiag.history.store import HistoryStore

    chosen = store_path(path, off)
    if chosen is None:
        raise UsageFailure("history is off (--no-history or IBDIAG_HISTORY=off): no store to read")
    return HistoryStore(chosen)


def _devices(sysfs_root: str) -> Dict[str, str]:
    """Each HCA under ``sysfs_root`` now: name -> store key (``ibdiag.facts.history``)."""
    from ibdiag.facts.history import node_keys

    base = os.path.join(sysfs_root, "class", "infiniband")
    found: List[Tuple[str, Optional[str]]] = []
    try:
        names = sorted(os.listdir(base))
    except OSError:
        names = []
    for name in names:
        try:
            with open(os.path.join(base, name, "node_guid")) as handle:
                found.append((name, handle.read().strip()))
        except OSError:
            found.append((name, None))
    return node_keys(found)


def _ports(store, sysfs_root: str, wanted: Optional[str]) -> Optional[Set[Tuple[str, int]]]:
    """The (key, port) pairs ``--port`` names (None: every port): ``mlx5_3:1``, ``mlx5_3`` (all
    its ports) or ``0x0c42a10300031a2b/1``; a name is looked up in sysfs, then in the store."""
    if wanted is None:
        return None
    keyed = _GUID_PORT.match(wanted)
    if keyed:
        given = keyed.group("guid")
        key = given if given.startswith("name:") else guid_key(given, "")
        if key == "name:":
            raise UsageFailure(f"--port: {given} is not a node GUID (0x and 16 hex digits)")
        return {(key, int(keyed.group("port")))}
    match = _PORT.match(wanted)
    if not match:
        raise UsageFailure(f"--port: expected a port like mlx5_0:1, got {wanted!r}")
    name, number = match.group("name"), match.group("port")
    keys = {key for device, key in _devices(sysfs_root).items() if device == name}
    known = store.last_samples()
    keys |= {sample.node_guid for sample in known if sample.device == name}
    if not keys:
        raise UsageFailure(f"--port: no HCA {name} here or in the history store")
    ports = {(s.node_guid, s.port) for s in known if s.node_guid in keys}
    if number is not None:
        return {(key, int(number)) for key in keys}
    return ports or {(key, 1) for key in keys}


@click.group("history", invoke_without_command=True)
@history_options
@click.option("--port", "port", metavar="PORT", help="Only this port: mlx5_3:1 (or mlx5_3).")
@click.option("--since", default="24h", show_default=True, help="How far back: 24h, 30m, 7d.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@click.option(
    "--sysfs",
    "sysfs_root",
    default="/sys",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Where HCA names are looked up (--port mlx5_3:1).",
)
@click.pass_context
def history_group(ctx, history_path, no_history, port, since, as_json, sysfs_root) -> int:
    """Each port's outages between runs (link down and back), as the history store holds them."""
    if ctx.invoked_subcommand is not None:
        ctx.obj = {"history_path": history_path, "no_history": no_history, "sysfs": sysfs_root}
        return 0
    now = datetime.now(timezone.utc)
    start = now - timedelta(seconds=_since(since))
    with _open(history_path, no_history) as store:
        ports = _ports(store, sysfs_root, port)
        names = {key: name for name, key in _devices(sysfs_root).items()}
        known = store.last_samples()
        guids = {key for key, _ in ports} if ports else {s.node_guid for s in known}
        guids |= set(names)
        outages = [o for o in store.outages(guids, start, now) if ports is None or o.key in ports]
        cleared = [
            t for t in store.tombstones(guids) if ports is None or (t.node_guid, t.port) in ports
        ]
        path = store.path
    if as_json:
        click.echo(
            json.dumps(
                {
                    "store": path,
                    "since": start.isoformat(),
                    "until": now.isoformat(),
                    "outages": [
                        {**o.model_dump(mode="json"), "down_s": o.down_s(now)} for o in outages
                    ],
                    "cleared": [t.model_dump(mode="json") for t in cleared],
                },
                indent=1,
            )
        )
        return 0
    click.echo(_timeline(path, start, now, outages, cleared, names))
    return 0


def _stamp(moment: Optional[datetime]) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%SZ") if moment is not None else "still down"


def _timeline(path, start, now, outages, cleared, names) -> str:
    ports = {(o.node_guid, o.port) for o in outages}
    lines = [
        f"history {path}: {len(outages)} outage{'s' if len(outages) != 1 else ''} of "
        f"{len(ports)} port{'s' if len(ports) != 1 else ''} since {_stamp(start)}"
    ]
    if outages:
        lines.append(f"{'PORT':<14}{'START':<22}{'END':<22}{'DOWN':<10}{'SEEN BY':<12}GUID")
    for outage in outages:
        name = names.get(outage.node_guid, outage.device)
        down = outage.down_s(now)
        length = span(down) if down is not None else f"{outage.downs}x ?"
        lines.append(
            f"{name + ':' + str(outage.port):<14}{_stamp(outage.start):<22}"
            f"{_stamp(outage.end):<22}{length:<10}{outage.source:<12}{outage.node_guid}"
        )
    for stone in cleared:
        name = names.get(stone.node_guid, stone.device)
        lines.append(
            f"cleared {name}:{stone.port} at {_stamp(stone.at)} by {stone.who}: {stone.reason}"
        )
    return "\n".join(lines)


@history_group.command("clear")
@click.option("--port", "port", required=True, metavar="PORT", help="The port: mlx5_3:1.")
@click.option("--reason", required=True, metavar="TEXT", help="Why (kept with who and when).")
@click.pass_context
def clear_command(ctx, port, reason) -> int:
    """End a port's flap and drop findings: outages before now no longer count."""
    from ibdiag.facts.history import Tombstone

    why = " ".join(reason.split())
    if not why:
        raise UsageFailure("--reason: say why (it is kept with who and when)")
    settings = ctx.obj or {}
    now = datetime.now(timezone.utc)
    who = os.environ.get("SUDO_USER") or getpass.getuser()
    with _open(settings.get("history_path"), settings.get("no_history", False)) as store:
        ports = _ports(store, settings.get("sysfs", "/sys"), port) or set()
        names = {key: name for name, key in _devices(settings.get("sysfs", "/sys")).items()}
        for key, number in sorted(ports):
            device = names.get(key) or port.split(":")[0]
            store.clear(
                Tombstone(
                    node_guid=key, port=number, device=device, at=now, who=who, reason=why[:500]
                )
            )
            click.echo(f"cleared {device}:{number} ({key}) at {_stamp(now)} by {who}: {why[:500]}")
    return 0
