"""The HTML report's System section and the bundle's manifest table (issue 26): what the
support catalogue gathered, shown first, escaped; the manifest's ``items``; a replayed bundle
showing the same; ``collect --level quick`` reading the catalogue's files and running nothing."""

from __future__ import annotations

import glob
import json
import os

from chromium_pages import HOSTILE as INERT
from chromium_pages import assert_renders_in_chromium, assert_self_contained
from snapshots import device, report_for, snapshot

from ibdiag.facts.support import (
    HcaFirmware,
    ItemRow,
    ItemStatus,
    ModuleInfo,
    SupportFiles,
    SupportInventory,
)
from ibdiag.render import html
from ibdiag.render.html_system import hca_rows, manifest_rows, system_facts

HOSTILE = "<script>alert(1)</script>"
SCENARIO = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
    "scenarios", "gcm-8xCX6-HDR-good", "root", "sys",
)  # fmt: skip


def _support_snapshot():
    files = SupportFiles(
        rows=[ItemRow(item="kernel", status=ItemStatus.COLLECTED, source="proc:cmdline", size=40)],
        os_release={"PRETTY_NAME": f"Rocky Linux 9.4 {HOSTILE}"},
        kernel_version="Linux version 5.14.0-427.el9.x86_64",
        cmdline="BOOT_IMAGE=/vmlinuz-5.14.0 iommu=pt",
        platform={
            "sys_vendor": "Dell Inc.",
            "product_name": "PowerEdge XE9680",
            "bios_version": "1.4.4",
            "bios_date": "05/12/2024",
        },
        module_parameters={"mlx5_core": {"prof_sel": "2"}},
    )
    inventory = SupportInventory(
        rows=[
            ItemRow(item="ofed_info", status=ItemStatus.COLLECTED, source="ofed_info -s"),
            ItemRow(
                item="mstflint_query",
                target="mlx5_0",
                status=ItemStatus.NO_PERMISSION,
                source="mstflint -d 0000:0c:00.0 q",
                reason=f"permission denied {HOSTILE}",
            ),
            ItemRow(
                item="ethtool_fec",
                status=ItemStatus.NOT_APPLICABLE,
                reason="no Ethernet (RoCE) port",
            ),
        ],
        ofed="MLNX_OFED_LINUX-23.10-1.1.9.0",
        modules=[
            ModuleInfo(
                name="mlx5_core",
                version="23.10-1.1.9",
                inbox=False,
                filename="/lib/modules/5.14.0/extra/mlnx-ofa_kernel/mlx5_core.ko",
            ),
        ],
        firmware=[
            HcaFirmware(
                hca="mlx5_0",
                bdf="0000:0c:00.0",
                psid="MT_0000000228",
                running="20.34.1002",
                stored="20.35.1012",
                sources=["mstflint q"],
            ),
        ],
    )
    snap = snapshot([device("mlx5_0"), device("mlx5_1")])
    return snap.model_copy(update={"facts": {"support_files": files, "support": inventory}})


def test_the_system_facts_name_os_kernel_platform_driver_and_ofed():
    rows = dict(system_facts(report_for(_support_snapshot())))
    assert rows["Distribution"] == f"Rocky Linux 9.4 {HOSTILE}"
    assert rows["Kernel command line"] == "BOOT_IMAGE=/vmlinuz-5.14.0 iommu=pt"
    assert rows["Platform"] == "Dell Inc. PowerEdge XE9680, BIOS 1.4.4 of 05/12/2024"
    assert rows["Driver"].startswith("mlx5_core 23.10-1.1.9 (OFED/DKMS build: /lib/modules/")
    assert rows["OFED / DOCA"] == "MLNX_OFED_LINUX-23.10-1.1.9.0"
    assert rows["Module parameters"] == "mlx5_core: prof_sel=2"


def test_an_absent_ofed_info_reads_as_the_inbox_driver():
    snap = _support_snapshot()
    inventory = snap.facts["support"].model_copy(
        update={"ofed": None, "rows": [ItemRow(item="ofed_info", status=ItemStatus.ABSENT)]}
    )
    snap = snap.model_copy(update={"facts": {**snap.facts, "support": inventory}})
    rows = dict(system_facts(report_for(snap)))
    assert rows["OFED / DOCA"].startswith("none (ofed_info is not installed")


def test_each_hca_row_has_firmware_psid_and_a_pending_reset():
    rows = {row["hca"]: row for row in hca_rows(report_for(_support_snapshot()))}
    assert rows["mlx5_0"]["firmware"] == "20.34.1002"
    assert rows["mlx5_0"]["stored"] == "20.35.1012"  # flashed, not running
    assert rows["mlx5_0"]["psid"] == "MT_0000000228"
    assert rows["mlx5_1"]["psid"] is None and rows["mlx5_1"]["stored"] is None
    assert rows["mlx5_1"]["firmware"]  # sysfs fw_ver without the catalogue


def test_the_page_shows_the_system_first_and_the_manifest_table_escaped():
    page = html.render(report_for(_support_snapshot()))
    assert page.index('id="system"') < page.index("<h2>Node</h2>")
    assert HOSTILE not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "20.35.1012 flashed, not running" in page
    table = page[page.index('id="manifest"') :]
    assert "2 collected, 1 no permission, 1 not applicable" in table
    assert "mstflint -d 0000:0c:00.0 q" in table
    assert "Never run by default" in table and "mstdump" in table


def test_hostile_catalogue_text_renders_inert_in_chromium(chromium, tmp_path):
    """Every text the catalogue brings in (a distribution's name, the kernel command line, a
    module parameter, a row's source and reason, a PSID) is shown as text in a real browser."""
    snap = _support_snapshot()
    files = snap.facts["support_files"].model_copy(
        update={
            "os_release": {"PRETTY_NAME": f"os{INERT}"},
            "cmdline": f"cmdline{INERT}",
            "module_parameters": {"mlx5_core": {"prof_sel": f"param{INERT}"}},
            "platform": {"sys_vendor": f"vendor{INERT}"},
        }
    )
    inventory = snap.facts["support"]
    inventory = inventory.model_copy(
        update={
            "rows": [*inventory.rows, ItemRow(item="modinfo", target=f"t{INERT}",
                     status=ItemStatus.FAILED, source=f"src{INERT}", reason=f"why{INERT}")],
            "firmware": [inventory.firmware[0].model_copy(update={"security": f"sec{INERT}"})],
        }
    )  # fmt: skip
    snap = snap.model_copy(update={"facts": {"support_files": files, "support": inventory}})
    report = report_for(snap)
    text = html.render(report)
    assert_self_contained(text)
    page = tmp_path / "system.html"
    page.write_text(text, encoding="utf-8")
    dom = assert_renders_in_chromium(chromium, page, tmp_path, f"IBDIAG {report.verdict.value}")
    assert "<script" not in dom.lower()
    for where in ("os", "cmdline", "param", "vendor", "t", "src", "why", "sec"):
        shown = f"{where}{INERT}".replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        assert shown.split('"')[0] in dom, where


def test_a_report_without_the_catalogue_has_no_manifest_table():
    report = report_for(snapshot([device("mlx5_0")]))
    assert manifest_rows(report)["rows"] == []
    page = html.render(report)
    assert 'id="manifest"' not in page and 'id="system"' in page


def test_quick_collect_reads_the_files_runs_nothing_and_replays_alike(run_cli, tmp_path):
    procfs = tmp_path / "proc"
    (procfs / "sys" / "kernel").mkdir(parents=True)
    (procfs / "sys" / "kernel" / "hostname").write_text("gpu001\n")
    (procfs / "cmdline").write_text("BOOT_IMAGE=/vmlinuz-5.14.0 ro iommu=pt\n")
    rootfs = tmp_path / "rootfs"
    (rootfs / "etc" / "modprobe.d").mkdir(parents=True)
    (rootfs / "etc" / "modprobe.d" / "mlnx.conf").write_text("options mlx5_core prof_sel=2\n")
    (rootfs / "usr" / "lib").mkdir(parents=True)
    (rootfs / "usr" / "lib" / "os-release").write_text('PRETTY_NAME="Ubuntu 22.04.4 LTS"\n')
    os.symlink("../usr/lib/os-release", rootfs / "etc" / "os-release")
    out = tmp_path / "out"
    result = run_cli(
        "collect", "--level", "quick", "--sysfs", SCENARIO, "--procfs", str(procfs),
        "--rootfs", str(rootfs), "-o", str(out), env={"PATH": str(tmp_path / "no-bin")},
    )  # fmt: skip
    assert result.exit_code == 0, result.stdout + result.stderr
    bundle = glob.glob(str(out / "ibdiag-*"))[0]
    with open(os.path.join(bundle, "report.json")) as handle:
        live = json.load(handle)["snapshot"]
    assert live["commands"] == {}  # level quick runs no command
    files = live["facts"]["support_files"]
    assert files["os_release"] == {"PRETTY_NAME": "Ubuntu 22.04.4 LTS"}
    assert files["cmdline"] == "BOOT_IMAGE=/vmlinuz-5.14.0 ro iommu=pt"
    status = {row["item"]: row["status"] for row in files["rows"]}
    assert status["os_release"] == status["rdma_config"] == status["kernel"] == "collected"
    assert status["opensm_config"] == "absent"
    assert "support" not in live["facts"]
    assert os.path.isfile(os.path.join(bundle, "root", "rootfs", "etc", "modprobe.d", "mlnx.conf"))
    with open(os.path.join(bundle, "manifest.json")) as handle:
        manifest = json.load(handle)
    assert manifest["snapshot"]["rootfs"] == str(rootfs)
    assert [row["item"] for row in manifest["items"]] == [row["item"] for row in files["rows"]]
    replayed = run_cli("report", bundle, "--json")
    assert replayed.exit_code == 0
    assert json.loads(replayed.stdout)["snapshot"]["facts"] == live["facts"]
