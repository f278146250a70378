"""The @check decorator, discovery (built-ins, entry points, drop-ins) and validation."""

from __future__ import annotations

import dataclasses
import importlib.metadata
import os
import sys
import textwrap
from pathlib import Path
from typing import Dict, Iterator, List, Optional

import pytest
from conftest import TESTS_DIR

from ibdiag import registry as registry_module
from ibdiag import resources, sources
from ibdiag.grade import run_check
from ibdiag.model import Result, Status
from ibdiag.registry import (
    ENTRY_POINT_GROUP,
    LEVELS,
    CheckSpec,
    Registry,
    RegistryError,
    check,
    find_entry_points,
    find_module_files,
    load_registry,
    spec_of,
    validate,
)
from ibdiag.thresholds import Thresholds

_TESTS_DIR = TESTS_DIR
if _TESTS_DIR not in sys.path:
    sys.path.insert(0, _TESTS_DIR)

import snapshots  # noqa: E402  (tests/ on sys.path, see above)

BUILTIN_IDS = {
    "hca.inventory",
    "hca.firmware",
    "link.state",
    "link.phys_state",
    "link.layer",
    "link.rate",
    "link.width",
    "netdev.operstate",
    "pci.link",
}


def _check_source(
    check_id: str = "site.example",
    *,
    title: str = "An example site check",
    needs: str = '{"sysfs"}',
    level: str = "quick",
    doc: Optional[str] = '"""Healthy: always. What to do: nothing."""',
    func_name: str = "example",
) -> str:
    """Python source of one decorated check, as a drop-in file would hold it."""
    body = f"    {doc}\n" if doc else ""
    return (
        f"@check({check_id!r}, title={title!r}, needs={needs}, level={level!r})\n"
        f"def {func_name}(snap, th):\n"
        f"{body}"
        f"    return [Result(target='node', status=Status.PASS, message={check_id!r})]\n"
    )


HEADER = "from ibdiag.model import Result, Status\nfrom ibdiag.registry import check\n\n\n"


def write_dropin(directory: Path, filename: str, *checks: str, extra: str = "") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / filename
    path.write_text(HEADER + extra + "\n\n".join(checks), encoding="utf-8")
    return path


def load_dropins(*directories: Path, builtins: bool = False) -> Registry:
    return load_registry(
        [str(directory) for directory in directories], entry_points=False, builtins=builtins
    )


def make_spec(check_id: str = "site.example", **changes: object) -> CheckSpec:
    def example(snap, th):
        """Healthy: always."""
        return []

    fields: Dict[str, object] = {
        "id": check_id,
        "title": "Example",
        "needs": frozenset({"sysfs"}),
        "level": "quick",
        "func": example,
        "origin": "/etc/ibdiag/checks.d/example.py",
    }
    fields.update(changes)
    return CheckSpec(**fields)  # type: ignore[arg-type]


# --- the decorator ----------------------------------------------------------------------------


def test_decorator_returns_the_function_unchanged_with_a_frozen_spec() -> None:
    def plain(snap, th):
        """Healthy: always."""
        return ["called", snap, th]

    decorated = check("site.plain", title="Plain", needs=["sysfs", "procfs"], level="standard")(
        plain
    )

    assert decorated is plain
    assert decorated(1, 2) == ["called", 1, 2]
    spec = spec_of(plain)
    assert isinstance(spec, CheckSpec)
    assert (spec.id, spec.title, spec.level) == ("site.plain", "Plain", "standard")
    assert spec.needs == frozenset({"sysfs", "procfs"})
    assert isinstance(spec.needs, frozenset)
    assert spec.func is plain
    assert spec.origin == "<unregistered>"
    assert spec.doc == "Healthy: always."
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.id = "site.other"  # type: ignore[misc]


def test_decorator_defaults_are_quick_and_sysfs() -> None:
    @check("site.defaults", title="Defaults")
    def defaults(snap, th):
        """Healthy: always."""

    spec = spec_of(defaults)
    assert spec is not None
    assert spec.level == "quick"
    assert spec.needs == frozenset({"sysfs"})


def test_decorating_registers_nothing_anywhere() -> None:
    @check("site.not_registered", title="Never registered")
    def not_registered(snap, th):
        """Healthy: always."""
        return []

    assert len(Registry()) == 0
    assert len(load_registry(entry_points=False, builtins=False)) == 0
    builtins = load_registry(entry_points=False)
    assert builtins.get("site.not_registered") is None
    assert "site.not_registered" not in {spec.id for spec in builtins}


def test_decorating_does_not_validate_yet_but_registration_does() -> None:
    @check("Not A Valid Id", title="Bad")
    def bad(snap, th):
        """Healthy: always."""

    spec = spec_of(bad)
    assert spec is not None and spec.id == "Not A Valid Id"
    with pytest.raises(RegistryError, match="Not A Valid Id"):
        Registry().add(spec)


def test_spec_of_ignores_objects_without_a_spec() -> None:
    def undecorated(snap, th):
        return []

    assert spec_of(undecorated) is None
    assert spec_of(object()) is None
    undecorated.__ibdiag_check__ = "a string, not a spec"  # type: ignore[attr-defined]
    assert spec_of(undecorated) is None


# --- built-ins --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def builtins() -> Registry:
    return load_registry(entry_points=False)


def test_builtins_are_all_found(builtins: Registry) -> None:
    ids = {spec.id for spec in builtins}
    assert BUILTIN_IDS <= ids


@pytest.mark.parametrize("check_id", sorted(BUILTIN_IDS))
def test_each_builtin_is_quick_needs_only_sysfs_and_is_documented(
    builtins: Registry, check_id: str
) -> None:
    spec = builtins.get(check_id)
    assert spec is not None
    assert spec.level == "quick"
    assert spec.needs == frozenset({"sysfs"})
    assert spec.title.strip()
    assert "Healthy" in spec.doc
    checks_dir = os.path.realpath(resources.builtin_checks_dir())
    assert os.path.dirname(os.path.realpath(spec.origin)) == checks_dir
    assert os.path.isfile(spec.origin)


def test_builtin_quick_checks_need_no_command(builtins: Registry) -> None:
    for spec in builtins.for_level("quick"):
        for need in spec.needs:
            assert sources.SOURCE_LEVELS[need] == "quick", (spec.id, need)


def test_builtin_checks_run_on_a_healthy_snapshot(builtins: Registry) -> None:
    snap = snapshots.snapshot(snapshots.devices(2))
    for check_id in sorted(BUILTIN_IDS):
        spec = builtins.get(check_id)
        assert spec is not None
        results = run_check(spec, snap, Thresholds())
        assert results, check_id
        assert {result.status for result in results} == {Status.PASS}, (check_id, results)


def test_loading_twice_gives_independent_registries() -> None:
    first = load_registry(entry_points=False)
    second = load_registry(entry_points=False)
    assert first is not second
    assert [spec.id for spec in first] == [spec.id for spec in second]


# --- validation -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad_id",
    ["Link.State", "state", "a..b", "link.", ".link", "link state.x", "1link.state", "link-x.y"],
)
def test_bad_id_in_a_dropin_names_the_id_and_the_file(tmp_path: Path, bad_id: str) -> None:
    path = write_dropin(tmp_path, "site.py", _check_source(bad_id))
    with pytest.raises(RegistryError) as caught:
        load_dropins(tmp_path)
    message = str(caught.value)
    assert repr(bad_id) in message
    assert str(path) in message
    assert "bad id" in message


@pytest.mark.parametrize("good_id", ["link.state", "site.my_check2", "a.b.c", "gpu_rail.nic0"])
def test_good_ids_are_accepted(good_id: str) -> None:
    registry = Registry()
    registry.add(make_spec(good_id))
    assert registry.get(good_id) is not None


@pytest.mark.parametrize("bad_id", ["Link.State", "state", "a..b"])
def test_registry_add_rejects_bad_ids_naming_id_and_origin(bad_id: str) -> None:
    with pytest.raises(RegistryError) as caught:
        Registry().add(make_spec(bad_id))
    assert repr(bad_id) in str(caught.value)
    assert "/etc/ibdiag/checks.d/example.py" in str(caught.value)


def test_duplicate_id_across_two_dropin_files_names_both_files(tmp_path: Path) -> None:
    first = write_dropin(tmp_path, "a_first.py", _check_source("site.dup"))
    second = write_dropin(tmp_path, "b_second.py", _check_source("site.dup"))
    with pytest.raises(RegistryError) as caught:
        load_dropins(tmp_path)
    message = str(caught.value)
    assert "'site.dup'" in message
    assert "duplicate" in message
    assert str(first) in message
    assert str(second) in message


def test_dropin_reusing_a_builtin_id_names_the_builtin_file(tmp_path: Path) -> None:
    dropin = write_dropin(tmp_path, "mine.py", _check_source("link.state"))
    with pytest.raises(RegistryError) as caught:
        load_dropins(tmp_path, builtins=True)
    message = str(caught.value)
    assert "'link.state'" in message
    assert str(dropin) in message
    assert os.path.join("checks", "link.py") in message


def test_unknown_need_names_the_need_and_the_file(tmp_path: Path) -> None:
    path = write_dropin(tmp_path, "site.py", _check_source(needs='{"sysfs", "telepathy"}'))
    with pytest.raises(RegistryError) as caught:
        load_dropins(tmp_path)
    message = str(caught.value)
    assert "telepathy" in message
    assert "unknown need" in message
    assert str(path) in message
    assert "'site.example'" in message


def test_unknown_level_names_the_level_and_the_file(tmp_path: Path) -> None:
    path = write_dropin(tmp_path, "site.py", _check_source(level="slow"))
    with pytest.raises(RegistryError) as caught:
        load_dropins(tmp_path)
    message = str(caught.value)
    assert "'slow'" in message
    assert "unknown level" in message
    assert str(path) in message
    for level in LEVELS:
        assert level in message


@pytest.fixture()
def perfquery_source(monkeypatch: pytest.MonkeyPatch) -> None:
    """A source only collected from level standard (perfquery runs a command)."""
    monkeypatch.setitem(sources.SOURCE_LEVELS, "perfquery", "standard")
    monkeypatch.setitem(registry_module.SOURCE_LEVELS, "perfquery", "standard")


@pytest.mark.usefixtures("perfquery_source")
def test_quick_check_needing_a_standard_source_is_rejected(tmp_path: Path) -> None:
    path = write_dropin(tmp_path, "site.py", _check_source(needs='{"sysfs", "perfquery"}'))
    with pytest.raises(RegistryError) as caught:
        load_dropins(tmp_path)
    message = str(caught.value)
    assert "perfquery" in message
    assert "quick" in message
    assert "standard" in message
    assert str(path) in message


@pytest.mark.usefixtures("perfquery_source")
@pytest.mark.parametrize("level", ["standard", "full"])
def test_standard_or_full_check_may_need_a_standard_source(tmp_path: Path, level: str) -> None:
    write_dropin(tmp_path, "site.py", _check_source(needs='{"perfquery"}', level=level))
    spec = load_dropins(tmp_path).get("site.example")
    assert spec is not None
    assert spec.needs == frozenset({"perfquery"})
    assert spec.can_use("perfquery")
    assert spec.can_use("sysfs")


def test_missing_docstring_is_rejected_naming_the_file(tmp_path: Path) -> None:
    path = write_dropin(tmp_path, "site.py", _check_source(doc=None))
    with pytest.raises(RegistryError) as caught:
        load_dropins(tmp_path)
    assert "docstring" in str(caught.value)
    assert str(path) in str(caught.value)
    assert "'site.example'" in str(caught.value)


def test_empty_title_is_rejected() -> None:
    with pytest.raises(RegistryError, match="title"):
        validate(make_spec(title="   "))


def test_syntax_error_in_a_dropin_names_the_file(tmp_path: Path) -> None:
    path = write_dropin(tmp_path, "broken.py", _check_source(), extra="def oops(:\n    pass\n")
    with pytest.raises(RegistryError) as caught:
        load_dropins(tmp_path)
    assert str(path) in str(caught.value)
    assert "SyntaxError" in str(caught.value)


def test_dropin_raising_on_import_names_the_file_and_the_exception(tmp_path: Path) -> None:
    path = write_dropin(
        tmp_path, "raises.py", _check_source(), extra="raise RuntimeError('boom at import')\n"
    )
    with pytest.raises(RegistryError) as caught:
        load_dropins(tmp_path)
    message = str(caught.value)
    assert str(path) in message
    assert "RuntimeError" in message
    assert "boom at import" in message
    assert isinstance(caught.value.__cause__, RuntimeError)


def test_dropin_importing_a_missing_module_names_the_file(tmp_path: Path) -> None:
    path = write_dropin(tmp_path, "needs_lib.py", "import ibdiag_no_such_module_xyz\n")
    with pytest.raises(RegistryError) as caught:
        load_dropins(tmp_path)
    assert str(path) in str(caught.value)
    assert "ibdiag_no_such_module_xyz" in str(caught.value)


# --- drop-in directories ----------------------------------------------------------------------


def test_dropin_directory_loads_py_files_and_skips_private_and_other_files(
    tmp_path: Path,
) -> None:
    good = write_dropin(tmp_path, "good.py", _check_source("site.good"))
    # Would fail to load (SyntaxError) and would register a check, if it were not skipped.
    write_dropin(tmp_path, "_private.py", _check_source("site.private"), extra="def x(:\n")
    (tmp_path / "notes.txt").write_text("not python", encoding="utf-8")
    (tmp_path / "old.py.bak").write_text("def x(:\n", encoding="utf-8")

    registry = load_dropins(tmp_path)

    assert [spec.id for spec in registry] == ["site.good"]
    spec = registry.get("site.good")
    assert spec is not None
    assert spec.origin == str(good)
    results = spec.func(None, None)
    assert results[0].message == "site.good"
    assert find_module_files(str(tmp_path)) == [str(good)]


def test_dropin_can_import_a_private_helper_from_its_directory(tmp_path: Path) -> None:
    # `_private.py` files are skipped as checks because they are helpers: a drop-in must be
    # able to import one that sits beside it.
    (tmp_path / "_rail_helpers.py").write_text("EXPECTED_RAILS = 8\n", encoding="utf-8")
    write_dropin(
        tmp_path,
        "rails.py",
        _check_source("site.rails"),
        extra="from _rail_helpers import EXPECTED_RAILS\n\n\n",
    )
    try:
        registry = load_dropins(tmp_path)
    finally:
        sys.modules.pop("_rail_helpers", None)
    assert [spec.id for spec in registry] == ["site.rails"]


def test_dropin_module_can_hold_several_checks_and_helpers(tmp_path: Path) -> None:
    write_dropin(
        tmp_path,
        "rails.py",
        _check_source("site.one", func_name="one"),
        _check_source("site.two", func_name="two"),
        extra="def helper():\n    return 1\n\n\nCONSTANT = 3\n\n\n",
    )
    registry = load_dropins(tmp_path)
    assert sorted(spec.id for spec in registry) == ["site.one", "site.two"]


def test_dropins_with_the_same_file_name_in_two_directories_both_load(tmp_path: Path) -> None:
    first = write_dropin(tmp_path / "etc", "site.py", _check_source("site.from_etc"))
    second = write_dropin(tmp_path / "cli", "site.py", _check_source("site.from_cli"))
    registry = load_dropins(tmp_path / "etc", tmp_path / "cli")
    assert [spec.id for spec in registry] == ["site.from_etc", "site.from_cli"]
    spec_etc, spec_cli = registry.get("site.from_etc"), registry.get("site.from_cli")
    assert spec_etc is not None and spec_etc.origin == str(first)
    assert spec_cli is not None and spec_cli.origin == str(second)


def test_dropins_do_not_land_in_sys_modules_under_their_bare_name(tmp_path: Path) -> None:
    write_dropin(tmp_path, "ibdiag_dropin_probe.py", _check_source("site.probe"))
    load_dropins(tmp_path)
    assert "ibdiag_dropin_probe" not in sys.modules


def test_dropins_come_after_builtins(tmp_path: Path) -> None:
    write_dropin(tmp_path, "site.py", _check_source("site.last"))
    ids = [spec.id for spec in load_dropins(tmp_path, builtins=True)]
    assert ids[-1] == "site.last"
    assert BUILTIN_IDS <= set(ids[:-1])


def test_missing_dropin_directory_names_it(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-checks.d"
    with pytest.raises(RegistryError) as caught:
        load_dropins(missing)
    assert str(missing) in str(caught.value)


def test_empty_dropin_directory_adds_nothing(tmp_path: Path) -> None:
    assert len(load_dropins(tmp_path)) == 0


def test_a_check_bound_to_two_names_in_one_module_registers_once(tmp_path: Path) -> None:
    # A module that re-exports a check under a second name (alias, backwards-compatible name)
    # holds one check, not two: the registry must not report it as a duplicate of itself.
    write_dropin(tmp_path, "aliased.py", _check_source("site.aliased"), "old_name = example\n")
    registry = load_dropins(tmp_path)
    assert [spec.id for spec in registry] == ["site.aliased"]


# --- entry points -----------------------------------------------------------------------------


@pytest.fixture()
def site_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A directory prepended to sys.path; modules imported from tmp_path are forgotten after."""
    directory = tmp_path / "site-packages"
    directory.mkdir()
    monkeypatch.syspath_prepend(str(directory))
    before = set(sys.modules)
    yield directory
    for name in set(sys.modules) - before:
        module_file = getattr(sys.modules[name], "__file__", None) or ""
        if module_file.startswith(str(tmp_path)):
            del sys.modules[name]


def install_fake_dist(
    site: Path,
    entry_points_txt: str,
    modules: Dict[str, str],
    dist: str = "fake_plugin-1.0",
    kind: str = "dist-info",
) -> Path:
    """A distribution as pip would leave it: <name>.dist-info/{METADATA,entry_points.txt}."""
    info = site / f"{dist}.{kind}"
    info.mkdir()
    name, version = dist.rsplit("-", 1)
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    (info / ("METADATA" if kind == "dist-info" else "PKG-INFO")).write_text(metadata)
    (info / "entry_points.txt").write_text(textwrap.dedent(entry_points_txt))
    for module, source in modules.items():
        (site / f"{module}.py").write_text(source, encoding="utf-8")
    return info


SITE_MODULE = HEADER + "\n\n".join(
    [
        _check_source("site.fake_entry", func_name="fake_entry"),
        _check_source("site.fake_other", func_name="fake_other"),
    ]
)


def test_entry_point_module_registers_its_checks_with_origin(site_dir: Path) -> None:
    install_fake_dist(
        site_dir, "[ibdiag.checks]\nsite = fake_site_checks\n", {"fake_site_checks": SITE_MODULE}
    )
    registry = load_registry()
    spec = registry.get("site.fake_entry")
    assert spec is not None
    assert "entry point 'site'" in spec.origin
    assert "fake_site_checks" in spec.origin
    assert registry.get("site.fake_other") is not None
    assert BUILTIN_IDS <= {found.id for found in registry}
    ids = [found.id for found in registry]
    assert ids.index("site.fake_entry") > max(ids.index(builtin) for builtin in BUILTIN_IDS)
    results = spec.func(None, None)
    assert isinstance(results[0], Result)


def test_entry_point_to_one_function_registers_only_that_check(site_dir: Path) -> None:
    install_fake_dist(
        site_dir,
        "[ibdiag.checks]\none = fake_site_checks_fn:fake_other\n",
        {"fake_site_checks_fn": SITE_MODULE},
    )
    registry = load_registry(builtins=False)
    assert [spec.id for spec in registry] == ["site.fake_other"]
    spec = registry.get("site.fake_other")
    assert spec is not None
    assert "entry point 'one'" in spec.origin
    assert "fake_site_checks_fn:fake_other" in spec.origin


def test_entry_points_off_loads_none(site_dir: Path) -> None:
    install_fake_dist(
        site_dir, "[ibdiag.checks]\nsite = fake_site_checks_off\n", {"fake_site_checks_off": ""}
    )
    registry = load_registry(entry_points=False, builtins=False)
    assert len(registry) == 0
    assert "fake_site_checks_off" not in sys.modules


def test_entry_point_that_cannot_be_imported_names_it(site_dir: Path) -> None:
    install_fake_dist(site_dir, "[ibdiag.checks]\nbroken = fake_missing_module_zz\n", {})
    with pytest.raises(RegistryError) as caught:
        load_registry(builtins=False)
    message = str(caught.value)
    assert "entry point 'broken'" in message
    assert "fake_missing_module_zz" in message
    assert "ModuleNotFoundError" in message


def test_entry_point_raising_on_import_names_it(site_dir: Path) -> None:
    install_fake_dist(
        site_dir,
        "[ibdiag.checks]\nexploding = fake_exploding_checks\n",
        {"fake_exploding_checks": "raise ValueError('plugin is broken')\n"},
    )
    with pytest.raises(RegistryError) as caught:
        load_registry(builtins=False)
    assert "entry point 'exploding'" in str(caught.value)
    assert "plugin is broken" in str(caught.value)


def test_entry_point_attribute_missing_names_it(site_dir: Path) -> None:
    install_fake_dist(
        site_dir,
        "[ibdiag.checks]\nattr = fake_site_checks_attr:no_such_function\n",
        {"fake_site_checks_attr": SITE_MODULE},
    )
    with pytest.raises(RegistryError) as caught:
        load_registry(builtins=False)
    assert "entry point 'attr'" in str(caught.value)
    assert "no_such_function" in str(caught.value)


def test_invalid_check_from_an_entry_point_names_the_entry_point(site_dir: Path) -> None:
    install_fake_dist(
        site_dir,
        "[ibdiag.checks]\nbadid = fake_badid_checks\n",
        {"fake_badid_checks": HEADER + _check_source("BadId")},
    )
    with pytest.raises(RegistryError) as caught:
        load_registry(builtins=False)
    assert "'BadId'" in str(caught.value)
    assert "entry point 'badid'" in str(caught.value)


def test_entry_point_and_dropin_with_one_id_name_both(site_dir: Path, tmp_path: Path) -> None:
    install_fake_dist(
        site_dir, "[ibdiag.checks]\nsite = fake_dup_checks\n", {"fake_dup_checks": SITE_MODULE}
    )
    dropin = write_dropin(tmp_path / "checks.d", "local.py", _check_source("site.fake_entry"))
    with pytest.raises(RegistryError) as caught:
        load_registry([str(tmp_path / "checks.d")], builtins=False)
    message = str(caught.value)
    assert "entry point 'site'" in message
    assert str(dropin) in message


def test_a_plugin_visible_twice_on_sys_path_registers_once(
    site_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The same plugin in the user site and the system site (or one directory listed twice):
    # importlib.metadata shadows the second copy on 3.10+, but on 3.9 lists both entry points.
    install_fake_dist(
        site_dir, "[ibdiag.checks]\nsite = fake_twice_checks\n", {"fake_twice_checks": SITE_MODULE}
    )
    user_site = tmp_path / "user-site"
    user_site.mkdir()
    install_fake_dist(
        user_site, "[ibdiag.checks]\nsite = fake_twice_checks\n", {"fake_twice_checks": SITE_MODULE}
    )
    monkeypatch.syspath_prepend(str(user_site))
    registry = load_registry(builtins=False)
    assert sorted(spec.id for spec in registry) == ["site.fake_entry", "site.fake_other"]


def test_other_entry_point_groups_are_ignored(site_dir: Path) -> None:
    install_fake_dist(
        site_dir,
        "[console_scripts]\nfake = fake_cli_mod:main\n\n[ibdiag.checks]\nsite = fake_grp\n",
        {"fake_grp": SITE_MODULE, "fake_cli_mod": "raise SystemExit('must not be imported')\n"},
    )
    registry = load_registry(builtins=False)
    assert sorted(spec.id for spec in registry) == ["site.fake_entry", "site.fake_other"]


# --- the cheap pre-scan before importlib.metadata ---------------------------------------------


def test_prescan_finds_a_dist_info_declaring_the_group(site_dir: Path) -> None:
    install_fake_dist(site_dir, "[ibdiag.checks]\nsite = fake_prescan\n", {"fake_prescan": ""})
    assert registry_module._declared_anywhere(ENTRY_POINT_GROUP) is True
    names = [entry_point.name for entry_point in find_entry_points()]
    assert "site" in names


def test_prescan_finds_an_egg_info_declaring_the_group(site_dir: Path) -> None:
    install_fake_dist(site_dir, "[ibdiag.checks]\nsite = fake_prescan_egg\n", {}, kind="egg-info")
    assert registry_module._declared_anywhere(ENTRY_POINT_GROUP) is True


def _isolated_path(monkeypatch: pytest.MonkeyPatch, *entries: Path) -> None:
    monkeypatch.setattr(sys, "path", [str(entry) for entry in entries])


def test_prescan_negative_skips_importlib_metadata(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    install_fake_dist(site, "[console_scripts]\nfake = fake_mod:main\n", {}, dist="other-2.0")
    install_fake_dist(site, "[ibdiag.checks.extra]\nx = fake_mod\n", {}, dist="near_miss-1.0")
    no_eps = site / "no_eps-1.0.dist-info"
    no_eps.mkdir()
    (no_eps / "METADATA").write_text("Metadata-Version: 2.1\nName: no_eps\nVersion: 1.0\n")
    dir_as_file = site / "odd-1.0.dist-info"
    (dir_as_file / "entry_points.txt").mkdir(parents=True)  # a directory: OSError on open
    binary = site / "binary-1.0.dist-info"
    binary.mkdir()
    (binary / "entry_points.txt").write_bytes(b"\xff\xfe[ibdiag.checks]\x00\xff")
    a_file = tmp_path / "some.zip"
    a_file.write_bytes(b"PK")

    _isolated_path(monkeypatch, site, tmp_path / "missing", a_file)

    def must_not_be_called(*args: object, **kwargs: object) -> List[object]:
        raise AssertionError("importlib.metadata.entry_points was called")

    monkeypatch.setattr(importlib.metadata, "entry_points", must_not_be_called)
    assert registry_module._declared_anywhere(ENTRY_POINT_GROUP) is False
    assert find_entry_points() == []
    assert len(load_registry(builtins=False)) == 0


def test_prescan_positive_consults_importlib_metadata(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    install_fake_dist(site, "[ibdiag.checks]\nsite = fake_mod\n", {})
    _isolated_path(monkeypatch, site)
    calls: List[int] = []
    real = importlib.metadata.entry_points

    def counting(*args: object, **kwargs: object) -> object:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(importlib.metadata, "entry_points", counting)
    assert registry_module._declared_anywhere(ENTRY_POINT_GROUP) is True
    found = find_entry_points()
    assert calls
    assert [(entry_point.name, entry_point.value) for entry_point in found] == [
        ("site", "fake_mod")
    ]


# --- levels -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("check_level", "run_level", "runs"),
    [
        ("quick", "quick", True),
        ("quick", "standard", True),
        ("quick", "full", True),
        ("standard", "quick", False),
        ("standard", "standard", True),
        ("standard", "full", True),
        ("full", "quick", False),
        ("full", "standard", False),
        ("full", "full", True),
    ],
)
def test_runs_at_orders_quick_standard_full(check_level: str, run_level: str, runs: bool) -> None:
    assert make_spec(level=check_level).runs_at(run_level) is runs


def test_for_level_keeps_registration_order() -> None:
    registry = Registry()
    for check_id, level in [
        ("site.full_one", "full"),
        ("site.quick_one", "quick"),
        ("site.standard_one", "standard"),
        ("site.quick_two", "quick"),
    ]:
        registry.add(make_spec(check_id, level=level))

    def ids(level: str) -> List[str]:
        return [spec.id for spec in registry.for_level(level)]

    assert ids("quick") == ["site.quick_one", "site.quick_two"]
    assert ids("standard") == ["site.quick_one", "site.standard_one", "site.quick_two"]
    assert ids("full") == [
        "site.full_one",
        "site.quick_one",
        "site.standard_one",
        "site.quick_two",
    ]
    assert [spec.id for spec in registry] == ids("full")
    assert len(registry) == 4


# --- drop-in files that are not regular files ---------------------------------------------------


def _within(seconds: float, run):
    """``run()`` in a thread: its result or exception, or a failure when it has not returned in
    time (an import that blocks must fail the test, not hang the suite)."""
    import threading

    outcome: Dict[str, object] = {}

    def work() -> None:
        try:
            outcome["result"] = run()
        except Exception as exc:  # noqa: BLE001 - handed to the test
            outcome["error"] = exc

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"loading did not return within {seconds} s"
    return outcome


def test_a_fifo_named_like_a_checks_file_is_refused_naming_it(tmp_path: Path) -> None:
    fifo = tmp_path / "site.py"
    os.mkfifo(fifo)
    outcome = _within(30, lambda: load_dropins(tmp_path))
    error = outcome.get("error")
    assert isinstance(error, RegistryError), outcome
    assert str(error) == f"{fifo}: cannot load: not a regular file (a FIFO): not read"


def test_a_directory_named_like_a_checks_file_is_refused_naming_it(tmp_path: Path) -> None:
    (tmp_path / "site.py").mkdir()
    with pytest.raises(RegistryError) as caught:
        load_dropins(tmp_path)
    assert str(caught.value) == f"{tmp_path / 'site.py'}: cannot load: is a directory"


def test_a_symlinked_checks_file_still_loads(tmp_path: Path) -> None:
    """Sites link their checks into checks.d from where they keep them."""
    kept = write_dropin(tmp_path / "kept", "site_checks.py", _check_source("site.linked"))
    (tmp_path / "checks.d").mkdir()
    (tmp_path / "checks.d" / "site.py").symlink_to(kept)
    assert load_dropins(tmp_path / "checks.d").get("site.linked") is not None


def test_ibdiag_checks_with_a_fifo_in_the_checks_dir_exits_3_naming_it(tmp_path, run_cli):
    os.mkfifo(tmp_path / "site.py")
    outcome = _within(30, lambda: run_cli("checks", "--checks-dir", str(tmp_path)))
    result = outcome["result"]
    assert result.exit_code == 3  # type: ignore[attr-defined]
    assert "site.py: cannot load: not a regular file (a FIFO)" in result.stderr  # type: ignore[attr-defined]
