"""The support catalogue (issue 26): valid data, every bad entry refused naming the item, the
README's comparison with sysinfo-snapshot and sos report equal to it row by row, and only
``ibdiag collect`` gathering it."""

from __future__ import annotations

import os
import re

import pytest

from ibdiag.families.support.catalogue import CatalogueError, load, parse
from ibdiag.sources import BUNDLE_ONLY, SOURCE_LEVELS

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

_GOOD = """
[[item]]
id = "ofed_info"
what = "w"
why = "y"
command = ["ofed_info", "-s"]
per = "node"
timeout_s = 5
sysinfo_snapshot = ""
sos = ""
"""


def test_the_shipped_catalogue_is_valid_with_every_kind():
    catalogue = load()
    kinds = {kind: catalogue.of_kind(kind) for kind in ("command", "files", "family", "never")}
    assert all(kinds.values()), {kind: len(items) for kind, items in kinds.items()}
    ids = [item.id for item in catalogue.item]
    assert len(ids) == len(set(ids))
    for item in kinds["command"]:
        assert item.timeout_s is not None and item.timeout_s <= 10, item.id  # --command-timeout
    # what the issue names is in it
    for wanted in ("ofed_info", "modinfo", "module_parameters", "kernel", "mstflint_query",
                   "mstconfig_query", "devlink_dev_info", "devlink_dev_param", "rdma_link",
                   "rdma_resource", "ip_link", "ethtool_driver", "ethtool_module", "ethtool_fec",
                   "gids", "sminfo", "saquery_sm", "ibdev2netdev", "numactl", "nvidia_smi_query",
                   "gpu_topology", "opensm_config", "rdma_config", "lspci"):  # fmt: skip
        assert catalogue.get(wanted) is not None, wanted


def test_what_ibdiag_never_runs_is_no_command_of_the_catalogue():
    """No state change, counter reset, CR dump, EEPROM dump or fabric sweep among the commands."""
    banned = re.compile(
        r"^(mst|mstdump|mstregdump|resourcedump|ibdiagnet|ibnetdiscover|iblinkinfo|ibhosts"
        r"|ibswitches)$|^-r$|^--pc$|^--eeprom-dump$|^set$|^reset$|^-y$|^snapshot$"
    )
    for item in load().of_kind("command"):
        for argv in filter(None, (item.command, item.fallback)):
            assert not any(banned.search(arg) for arg in argv), (item.id, argv)
            assert not (argv[0] == "ethtool" and "-e" in argv), (item.id, argv)  # EEPROM dump
    assert "q" in load().get("mstconfig_query").command  # query only


@pytest.mark.parametrize(
    "change, named",
    [
        (_GOOD + _GOOD, "item ofed_info is listed twice"),
        (_GOOD.replace('per = "node"', 'per = "hca"').replace('"-s"', '"{netdev}"'),
         "per hca fills no netdev"),
        (_GOOD + 'files = ["sys:x"]\n', "has command and files"),
        (_GOOD.replace('command = ["ofed_info", "-s"]', 'files = ["etc:x"]'), "fallback, per"),
        (_GOOD.replace('command = ["ofed_info", "-s"]\nper = "node"\ntimeout_s = 5',
                       'files = ["sys:../x"]'), "file sys:../x"),
        (_GOOD + 'redact = ["secrets"]\n', "unknown redaction kind"),
        (_GOOD.replace('id = "ofed_info"', 'id = "Bad-Id"'), "item.0.id"),
        ("[[item]\n", "not TOML"),
    ],
)  # fmt: skip
def test_a_bad_catalogue_is_one_error_naming_the_item(change, named):
    with pytest.raises(CatalogueError) as raised:
        parse(change, "cat.toml")
    assert named in str(raised.value)
    assert str(raised.value).startswith("cat.toml: ")
    assert "\n" not in str(raised.value)


def test_the_readme_compares_every_item_with_the_anchors_as_the_catalogue_says():
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as handle:
        readme = handle.read()
    rows = {}
    for line in readme.splitlines():
        match = re.match(r"^\| `([a-z0-9_]+)` \| (.*) \| (.*) \| (.*) \|$", line)
        if match:
            rows[match[1]] = (match[2], match[3].replace("\\|", "|"), match[4].replace("\\|", "|"))
    for item in load().item:
        assert item.id in rows, f"README has no row for the catalogue's {item.id}"
        how, sysinfo, sos = rows[item.id]
        assert sysinfo == (item.sysinfo_snapshot or "—"), item.id
        assert sos == (item.sos or "—"), item.id
        if item.command is not None:
            assert f"`{' '.join(item.command)}`" in how, item.id
        if item.never is not None:
            assert item.never in how, item.id
    assert set(rows) <= {item.id for item in load().item}


def test_collect_list_prints_every_item_and_exits_0(run_cli):
    result = run_cli("collect", "--list")
    assert result.exit_code == 0
    for item in load().item:
        assert re.search(rf"^{item.id} ", result.stdout, re.M), item.id
    assert "mstflint -d {bdf} q  [per hca, 10 s, root]" in result.stdout
    assert "Never run by default" in result.stdout


def test_only_collect_gathers_the_catalogue():
    """No check needs it; ``snapshot`` of every source of a level leaves it out."""
    from snapshots import builtin_registry

    specs = list(builtin_registry())
    assert len(specs) > 40
    for spec in specs:
        assert not spec.needs & BUNDLE_ONLY, spec.id
    assert BUNDLE_ONLY <= set(SOURCE_LEVELS)


def test_the_pipeline_adds_the_catalogue_for_collect_only():
    from ibdiag.pipeline import Pipeline, PipelineOptions

    def needs(**options):
        return Pipeline.prepare(PipelineOptions(**options)).needs

    assert not needs(level="standard") & BUNDLE_ONLY
    assert needs(level="standard", support=True) >= {"support", "support_files", "topology"}
    quick = needs(level="quick", support=True)
    assert "support_files" in quick and "support" not in quick  # level quick runs no command


def test_a_rootfs_that_is_not_a_directory_is_one_line_and_exit_3(run_cli, tmp_path):
    result = run_cli("collect", "--rootfs", str(tmp_path / "missing"), "-o", str(tmp_path))
    assert result.exit_code == 3
    assert "--rootfs" in result.stderr and "does not exist" in result.stderr
    assert not list(tmp_path.glob("ibdiag-*"))
