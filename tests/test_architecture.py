"""The design's import rules, checked by scanning the code (DESIGN §1-2), not by reading it.

Every ``import`` and ``from ... import`` in ``ibdiag/`` and ``checks/`` - at module level, in a
function, under ``if TYPE_CHECKING:`` alike - is read with ``ast`` and resolved to the module
it names. On that graph:

- no import cycle between ibdiag's modules (each one is reported as its path, ``a -> b -> a``);
- checks read typed facts only: they import no machine reader (``ibdiag.sources``), no process
  control (``ibdiag.runner``), no command line (``ibdiag.cli``), no bundle code
  (``ibdiag.bundle``), and see no ``CommandRun`` - neither the name, nor a module of ibdiag's
  that deals in them (``ibdiag.runner``, ``ibdiag.families``...; ``ibdiag.model`` defines it
  and is the exception), nor a Snapshot member that hands one out (``snap.run(...)``,
  ``snap.commands``);
- renderers see only the Report: ``ibdiag.render`` imports no grader, reader, runner or CLI;
- the fleet reads Reports: ``ibdiag.fleet`` imports no machine reader (it may start its
  processes through ``ibdiag.runner``);
- only the command line imports the command line (and the entry points that start it).

The scanner is tested on small planted trees, so each rule is shown to fail when broken.
"""

from __future__ import annotations

import ast
import os
import textwrap
import typing
from dataclasses import dataclass, field
from typing import Dict, FrozenSet, Iterable, List, Optional, Set, Tuple

from conftest import REPO

SCANNED = ("ibdiag", "checks")  # top-level packages whose imports are read
# The process's entry points: they start the command line, so they import it.
CLI_ENTRY_POINTS = frozenset({"ibdiag.__main__", "ibdiag.entry"})
COMMAND_RUN = "CommandRun"
COMMAND_RUN_HOME = "ibdiag.model"  # defines CommandRun beside the Snapshot checks must read


@dataclass
class Module:
    name: str
    path: str  # relative to the root scanned
    tree: ast.Module
    imports: List[Tuple[str, int]] = field(default_factory=list)  # (module imported, line)


def _module_name(root: str, path: str) -> str:
    rel = os.path.relpath(path, root)[: -len(".py")].split(os.sep)
    if rel[-1] == "__init__":
        rel = rel[:-1]
    return ".".join(rel)


def scan(root: str, packages: Iterable[str] = SCANNED) -> Dict[str, Module]:
    """Every module under ``root/<package>``, its imports resolved to module names (the most
    specific module that exists: ``from ibdiag.bundle import write`` is ``ibdiag.bundle.write``,
    ``from ibdiag.model import Snapshot`` is ``ibdiag.model``). Imports of anything outside
    ``packages`` (the standard library, pydantic, ...) are left out; each module imported is
    listed once per line that imports it."""
    modules: Dict[str, Module] = {}
    for package in packages:
        for folder, dirs, files in os.walk(os.path.join(root, package)):
            dirs[:] = sorted(d for d in dirs if not d.startswith((".", "__pycache__")))
            for name in sorted(files):
                if name.endswith(".py"):
                    path = os.path.join(folder, name)
                    with open(path, encoding="utf-8") as handle:
                        tree = ast.parse(handle.read(), filename=path)
                    module = _module_name(root, path)
                    modules[module] = Module(module, os.path.relpath(path, root), tree)
    for module in modules.values():
        is_package = os.path.basename(module.path) == "__init__.py"
        for node in ast.walk(module.tree):
            for target in _targets(node, module.name, is_package, modules):
                seen = (target, node.lineno)
                if target.split(".")[0] in packages and seen not in module.imports:
                    module.imports.append(seen)
    return modules


def _targets(node: ast.AST, importer: str, is_package: bool, known: Dict[str, Module]) -> List[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    base = node.module or ""
    if node.level:
        parts = importer.split(".")
        if not is_package:
            parts = parts[:-1]
        parts = parts[: len(parts) - (node.level - 1)]
        base = ".".join(parts + ([base] if base else []))
    found = []
    for alias in node.names:
        sub = f"{base}.{alias.name}"
        found.append(sub if sub in known else base)
    return found


def within(module: str, prefix: str) -> bool:
    """``module`` is ``prefix`` or inside it (``ibdiag.cli_options`` is not in ``ibdiag.cli``)."""
    return module == prefix or module.startswith(prefix + ".")


# --- the rules ---------------------------------------------------------------------------


def cycles(modules: Dict[str, Module], package: str = "ibdiag") -> List[List[str]]:
    """One cycle (``[a, b, a]``) per strongly connected group of ``package``'s modules."""
    graph: Dict[str, Set[str]] = {
        name: {t for t, _ in module.imports if within(t, package) and t in modules}
        for name, module in modules.items()
        if within(name, package)
    }
    found = []
    for group in _strongly_connected(graph):
        if len(group) == 1:
            (only,) = group
            if only not in graph[only]:
                continue
        found.append(_shortest_cycle(graph, min(group), group))
    return sorted(found)


def _strongly_connected(graph: Dict[str, Set[str]]) -> List[Set[str]]:
    """Tarjan's algorithm, iterative (a deep import chain must not hit the recursion limit)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    groups: List[Set[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                group = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.add(member)
                    if member == node:
                        break
                groups.append(group)
    return groups


def _shortest_cycle(graph: Dict[str, Set[str]], start: str, group: Set[str]) -> List[str]:
    """The shortest path ``start -> ... -> start`` inside ``group`` (breadth first)."""
    came_from: Dict[str, Optional[str]] = {start: None}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph[node] & group):
                if child == start:
                    path = [node]
                    while came_from[path[-1]] is not None:
                        path.append(came_from[path[-1]])  # type: ignore[arg-type]
                    return [*reversed(path), start]
                if child not in came_from:
                    came_from[child] = node
                    following.append(child)
        frontier = following
    raise AssertionError(f"no cycle through {start}")  # a group always has one


# (who, what they may not import, why): a module inside ``who`` importing one inside ``what``
FORBIDDEN: Tuple[Tuple[str, str, str], ...] = (
    ("checks", "ibdiag.sources", "checks read typed facts only, no machine reader"),
    ("checks", "ibdiag.runner", "checks read typed facts only, no process control"),
    ("checks", "ibdiag.cli", "checks read typed facts only, no command line"),
    ("checks", "ibdiag.bundle", "checks read typed facts only, no bundle code"),
    ("checks", "ibdiag.history", "checks read the history as facts, never the store"),
    ("ibdiag.render", "ibdiag.grade", "renderers see only the Report, not the grader"),
    ("ibdiag.render", "ibdiag.sources", "renderers see only the Report, no machine reader"),
    ("ibdiag.render", "ibdiag.runner", "renderers see only the Report, no process control"),
    ("ibdiag.render", "ibdiag.cli", "renderers see only the Report, no command line"),
    ("ibdiag.render", "ibdiag.history", "renderers see only the Report, not the store"),
    ("ibdiag.fleet", "ibdiag.sources", "the fleet reads Reports, not the machine readers"),
)


def forbidden_imports(modules: Dict[str, Module]) -> List[str]:
    """Each import a rule of ``FORBIDDEN`` forbids, and each import of ``ibdiag.cli`` from
    outside it (but for the entry points), as ``path:line: importer imports target (why)``."""
    found = []
    for name, module in sorted(modules.items()):
        for target, line in module.imports:
            where = f"{module.path}:{line}: {name} imports {target}"
            for who, what, why in FORBIDDEN:
                if within(name, who) and within(target, what):
                    found.append(f"{where} ({why})")
            if (
                within(target, "ibdiag.cli")
                and not within(name, "ibdiag.cli")
                and name not in CLI_ENTRY_POINTS
            ):
                found.append(f"{where} (only the command line imports the command line)")
    return found


def snapshot_run_members() -> FrozenSet[str]:
    """The Snapshot's fields and methods that hand out a CommandRun (``commands``, ``run``):
    read off their annotations, so a new one is covered without editing this test."""
    from ibdiag.model import Snapshot

    members = {
        name for name, info in Snapshot.model_fields.items() if COMMAND_RUN in repr(info.annotation)
    }
    for name, value in vars(Snapshot).items():
        if callable(value) and not name.startswith("__"):
            hints = typing.get_type_hints(value)
            if COMMAND_RUN in repr(hints.get("return")):
                members.add(name)
    return frozenset(members)


def _names_command_run(module: Module) -> bool:
    """The module's code (not its docstrings or comments) names CommandRun."""
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Name) and node.id == COMMAND_RUN:
            return True
        if isinstance(node, ast.Attribute) and node.attr == COMMAND_RUN:
            return True
        if isinstance(node, ast.ImportFrom) and any(a.name == COMMAND_RUN for a in node.names):
            return True
    return False


def command_runs_in_checks(modules: Dict[str, Module], run_members: Iterable[str]) -> List[str]:
    """Where a check module sees a CommandRun (module doc), as ``path:line: what``."""
    members = frozenset(run_members)
    dealers = {
        name
        for name, module in modules.items()
        if name != COMMAND_RUN_HOME and within(name, "ibdiag") and _names_command_run(module)
    }
    found = []
    for name, module in sorted(modules.items()):
        if not within(name, "checks"):
            continue
        where = module.path
        for target, line in module.imports:
            if target in dealers:
                found.append(f"{where}:{line}: imports {target}, which deals in CommandRun")
        for node in ast.walk(module.tree):
            line = getattr(node, "lineno", 0)
            if isinstance(node, ast.ImportFrom) and any(a.name == COMMAND_RUN for a in node.names):
                found.append(f"{where}:{line}: imports CommandRun")
            elif (isinstance(node, ast.Name) and node.id == COMMAND_RUN) or (
                isinstance(node, ast.Attribute) and node.attr == COMMAND_RUN
            ):
                found.append(f"{where}:{line}: names CommandRun")
            elif isinstance(node, ast.Attribute) and node.attr in members:
                found.append(f"{where}:{line}: reads .{node.attr}, which holds CommandRuns")
    return found


# --- the rules on the code -----------------------------------------------------------------

CODE = scan(REPO)


def test_the_scanner_reads_the_whole_code():
    assert "ibdiag.model" in CODE and "checks.link" in CODE and "ibdiag.render.text" in CODE
    assert "ibdiag.model" in {target for target, _line in CODE["checks.inventory"].imports}
    # collect imports the runner's modules only inside functions (level quick runs no command)
    assert "ibdiag.runner.interruptible" in {target for target, _ in CODE["ibdiag.collect"].imports}


def test_no_import_cycle_between_ibdiag_modules():
    found = cycles(CODE)
    assert found == [], "import cycles:\n" + "\n".join(" -> ".join(c) for c in found)


def test_no_forbidden_import():
    found = forbidden_imports(CODE)
    assert found == [], "forbidden imports:\n" + "\n".join(found)


def test_no_check_module_sees_a_command_run():
    members = snapshot_run_members()
    assert {"commands", "run"} <= members  # what the Snapshot hands out today
    found = command_runs_in_checks(CODE, members)
    assert found == [], "checks that see a CommandRun:\n" + "\n".join(found)


# --- each rule fails on a planted violation ---------------------------------------------------


def _plant(tmp_path, files: Dict[str, str]) -> Dict[str, Module]:
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return scan(str(tmp_path))


CLEAN = {
    "ibdiag/__init__.py": "",
    "ibdiag/model.py": "class CommandRun: ...\nclass Snapshot: ...\n",
    "ibdiag/grade.py": "from ibdiag.model import Snapshot\n",
    "ibdiag/render/__init__.py": "",
    "ibdiag/render/text.py": "from ibdiag.model import Snapshot\n",
    "ibdiag/sources/__init__.py": "",
    "ibdiag/sources/sysfs.py": "from ibdiag.runner import proc\n",
    "ibdiag/runner/__init__.py": "",
    "ibdiag/runner/proc.py": "from ibdiag.model import CommandRun\n",
    "ibdiag/fleet/__init__.py": "",
    "ibdiag/fleet/run.py": "from ibdiag.runner.proc import x\n",  # the runner: allowed
    "ibdiag/cli/__init__.py": "from . import main\n",
    "ibdiag/cli/main.py": "from ibdiag import grade\nfrom ..render import text\n",
    "ibdiag/entry.py": "def main():\n    from ibdiag.cli import main\n",
    "checks/__init__.py": "",
    "checks/link.py": "from ibdiag.model import Snapshot\n\ndef f(snap):\n    return snap.ports\n",
}


def test_a_clean_planted_tree_passes_every_rule(tmp_path):
    planted = _plant(tmp_path, CLEAN)
    assert planted["ibdiag.cli.main"].imports == [("ibdiag.grade", 1), ("ibdiag.render.text", 2)]
    assert planted["ibdiag.cli"].imports == [("ibdiag.cli.main", 1)]
    assert cycles(planted) == []
    assert forbidden_imports(planted) == []
    assert command_runs_in_checks(planted, {"run", "commands"}) == []


def test_a_cycle_is_found_through_a_function_level_import_and_reported_as_its_path(tmp_path):
    planted = _plant(
        tmp_path,
        {
            **CLEAN,
            "ibdiag/grade.py": "from ibdiag.render import text\n",
            "ibdiag/render/text.py": "def f():\n    from ibdiag.cli import main\n",
        },
    )
    assert cycles(planted) == [["ibdiag.cli.main", "ibdiag.render.text", "ibdiag.cli.main"]]
    planted = _plant(tmp_path, {**CLEAN, "ibdiag/grade.py": "from ibdiag.cli.main import x\n"})
    assert cycles(planted) == [["ibdiag.cli.main", "ibdiag.grade", "ibdiag.cli.main"]]


def test_a_module_importing_itself_is_a_cycle(tmp_path):
    planted = _plant(tmp_path, {**CLEAN, "ibdiag/grade.py": "from . import grade\n"})
    assert cycles(planted) == [["ibdiag.grade", "ibdiag.grade"]]


def _violations(tmp_path, rel: str, text: str) -> str:
    """What ``forbidden_imports`` says of the clean tree with ``rel`` replaced by ``text``."""
    planted = _plant(tmp_path, {**CLEAN, rel: text})
    return "\n".join(forbidden_imports(planted))


def test_checks_may_not_import_readers_runner_cli_or_bundle(tmp_path):
    for target, why in (
        ("ibdiag.sources.sysfs", "no machine reader"),
        ("ibdiag.runner", "no process control"),
        ("ibdiag.cli.main", "no command line"),
        ("ibdiag.bundle.write", "no bundle code"),
    ):
        line = f"def f():\n    from {target} import INFINIBAND_CLASS\n"
        found = _violations(tmp_path, "checks/link.py", line)
        assert "checks.link imports" in found and why in found, (target, found)


def test_renderers_may_not_import_grader_readers_runner_or_cli(tmp_path):
    for target in ("ibdiag.grade", "ibdiag.sources.sysfs", "ibdiag.runner.proc", "ibdiag.cli"):
        found = _violations(tmp_path, "ibdiag/render/text.py", f"import {target}\n")
        assert f"ibdiag.render.text imports {target} (renderers see only the Report" in found


def test_the_fleet_may_use_the_runner_but_not_the_readers(tmp_path):
    found = _violations(tmp_path, "ibdiag/fleet/run.py", "from ibdiag.sources import sysfs\n")
    assert "ibdiag.fleet.run imports ibdiag.sources.sysfs (the fleet reads Reports" in found


def test_only_the_command_line_imports_the_command_line(tmp_path):
    found = _violations(tmp_path, "ibdiag/fleet/run.py", "from ibdiag.cli import main\n")
    assert found == (
        "ibdiag/fleet/run.py:1: ibdiag.fleet.run imports ibdiag.cli.main"
        " (only the command line imports the command line)"
    )
    options = {"ibdiag/cli_options.py": "", "ibdiag/grade.py": "import ibdiag.cli_options\n"}
    planted = _plant(tmp_path, {**CLEAN, **options})
    assert forbidden_imports(planted) == []  # a sibling whose name starts with "cli" is not it


def test_a_check_that_sees_a_command_run_is_named(tmp_path):
    plants = {
        "from ibdiag.model import CommandRun, Snapshot\n": "checks/link.py:1: imports CommandRun",
        "import ibdiag.model\n\nrun = ibdiag.model.CommandRun\n": "checks/link.py:3: names",
        "def f(snap):\n    return snap.run('perfquery')\n": "checks/link.py:2: reads .run",
        "def f(snap):\n    return list(snap.commands)\n": "checks/link.py:2: reads .commands",
        "from ibdiag.runner.proc import why\n": (
            "checks/link.py:1: imports ibdiag.runner.proc, which deals in CommandRun"
        ),
        "def f(run: 'CommandRun'):\n    return CommandRun\n": "checks/link.py:2: names CommandRun",
    }
    for text, expected in plants.items():
        planted = _plant(tmp_path, {**CLEAN, "checks/link.py": text})
        found = command_runs_in_checks(planted, {"run", "commands"})
        assert any(line.startswith(expected) for line in found), (text, found)
