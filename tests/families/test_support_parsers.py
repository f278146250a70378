"""The support family's parsers (``ibdiag.families.support.parsers``) on the real captures in
tests/captures/support (each folder's SOURCES.md says where each came from and what is
hand-made): every field each parser returns, each spelling the tools print, and odd values
that must give None, never an exception."""

from __future__ import annotations

import json
import os

import pytest

from ibdiag.facts.support import ModuleInfo
from ibdiag.families.support import parsers as P

CAPTURES = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "captures", "support"
)


def capture(folder: str, name: str) -> str:
    with open(os.path.join(CAPTURES, folder, name), encoding="utf-8") as handle:
        return handle.read()


# -- ofed_info -s -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, release",
    [
        ("daocloud-23.07-colon.txt", "MLNX_OFED_LINUX-23.07-0.5.1.2"),
        ("notes-23.10-colon.txt", "MLNX_OFED_LINUX-23.10-1.1.9.0"),
        ("notes-24.10-no-colon.txt", "MLNX_OFED_LINUX-24.10-1.1.4.0"),
    ],
)
def test_ofed_info_with_and_without_its_colon(name, release):
    assert P.parse_ofed_info(capture("ofed_info", name)) == release


@pytest.mark.parametrize(
    "text",
    [
        "",
        "N/A\n",
        "ofed_info: command not found\n",
        "MLNX_OFED_LINUX-" + "9" * 300 + "\n",  # too long to be a release
        "MLNX_OFED_LINUX-23.10\x1b[31m-1.1.9.0:\n",  # a control character inside
        capture("modinfo", "skyao-debian12-ofed-24.10-mlx5_core.txt"),  # another tool's output
    ],
)
def test_ofed_info_odd_outputs_give_none(text):
    assert P.parse_ofed_info(text) is None


def test_ofed_info_takes_the_release_line_after_a_warning():
    text = "Warning: something odd\n" + capture("ofed_info", "notes-23.10-colon.txt")
    assert P.parse_ofed_info(text) == "MLNX_OFED_LINUX-23.10-1.1.9.0"


# -- modinfo ------------------------------------------------------------------------------------


INBOX = ModuleInfo(
    name="mlx5_core",
    filename="/lib/modules/6.1.0-31-amd64/kernel/drivers/net/ethernet/mellanox/mlx5/core/mlx5_core.ko",
    version=None,  # an inbox build carries no version
    srcversion=None,
    vermagic="6.1.0-31-amd64 SMP preempt mod_unload modversions",
    inbox=True,
)
OFED = ModuleInfo(
    name="mlx5_core",
    filename="/lib/modules/6.1.0-31-amd64/updates/dkms/mlx5_core.ko",
    version="24.10-2.1.8",
    srcversion="78352976D87E8F24553D352",
    vermagic="6.1.0-31-amd64 SMP preempt mod_unload modversions",
    inbox=False,
)
BUILTIN = ModuleInfo(
    name="ib_core", filename="(builtin)", version=None, srcversion=None, vermagic=None, inbox=True
)


def test_modinfo_inbox_build():
    assert P.parse_modinfo(capture("modinfo", "skyao-debian12-inbox-mlx5_core.txt")) == [INBOX]


def test_modinfo_ofed_build():
    assert P.parse_modinfo(capture("modinfo", "skyao-debian12-ofed-24.10-mlx5_core.txt")) == [OFED]


def test_modinfo_builtin_module_whose_name_comes_before_its_filename():
    # kmod prints a built-in module's name: first (tests/captures/support/modinfo/SOURCES.md)
    assert P.parse_modinfo(capture("modinfo", "handmade-builtin-ib_core.txt")) == [BUILTIN]


def test_modinfo_several_modules_one_block_each_in_order():
    text = "".join(
        capture("modinfo", name)
        for name in (
            "skyao-debian12-ofed-24.10-mlx5_core.txt",
            "handmade-builtin-ib_core.txt",
            "skyao-debian12-inbox-mlx5_core.txt",
        )
    )
    assert P.parse_modinfo(text) == [OFED, BUILTIN, INBOX]


def test_modinfo_not_found_on_stderr_is_no_module():
    assert P.parse_modinfo(capture("modinfo", "handmade-not-found.stderr")) == []


@pytest.mark.parametrize(
    "filename, inbox",
    [
        ("/lib/modules/5.14.0-362.el9.x86_64/weak-updates/mlnx-ofa_kernel/mlx5_core.ko", False),
        ("/lib/modules/5.14.0-362.el9.x86_64/extra/mlnx-ofa_kernel/mlx5_core.ko", False),
        ("/opt/mlx5_core.ko", None),  # the path says neither
    ],
)  # fmt: skip
def test_modinfo_where_the_module_lives_says_inbox_or_not(filename, inbox):
    (module,) = P.parse_modinfo(f"filename:       {filename}\n")
    assert (module.name, module.inbox) == ("mlx5_core", inbox)


def test_modinfo_odd_values_are_none():
    text = (
        "filename:       /lib/modules/6.1.0/kernel/drivers/infiniband/core/ib_uverbs.ko\n"
        "version:        " + "9" * 300 + "\n"  # too long
        "srcversion:     N/A\x07\n"  # non-printable
        "vermagic:       \n"  # empty
    )
    (module,) = P.parse_modinfo(text)
    assert module == ModuleInfo(name="ib_uverbs", filename=module.filename, inbox=True)


def test_modinfo_a_filename_that_names_no_module_is_dropped():
    assert P.parse_modinfo("filename:       /lib/modules/x/kernel/../$(reboot).ko\n") == []


# -- mstflint q / flint q -----------------------------------------------------------------------


def test_flint_query_with_fw_version_running():
    parsed = P.parse_flint_query(capture("mstflint", "ironic-running-differs.txt"))
    assert parsed == {
        "stored": "20.35.1012",
        "running": "20.34.1002",
        "psid": "MT_0000000228",
        "security": None,  # N/A
    }


def test_flint_query_without_fw_version_running_runs_what_is_on_flash():
    parsed = P.parse_flint_query(capture("mstflint", "ironic-no-running.txt"))
    assert parsed == {
        "stored": "20.35.1012",
        "running": "20.35.1012",
        "psid": "MT_0000000228",
        "security": None,
    }


def test_flint_query_of_an_image_file():
    parsed = P.parse_flint_query(capture("mstflint", "ironic-image-base-guid-na.txt"))
    assert parsed == {
        "stored": "20.36.1012",
        "running": "20.36.1012",
        "psid": "MT_0000000228",
        "security": None,
    }


def test_flint_query_secure_fw_and_an_oem_psid():
    # the capture with the two values a secure-fw OEM board prints (research-26 §3.3 notes)
    text = (
        capture("mstflint", "ironic-no-running.txt")
        .replace("MT_0000000228", "HP_2420110034")
        .replace("Security Attributes:   N/A", "Security Attributes:   secure-fw")
    )
    parsed = P.parse_flint_query(text)
    assert (parsed["psid"], parsed["security"]) == ("HP_2420110034", "secure-fw")


@pytest.mark.parametrize(
    "line, field",
    [
        ("FW Version:            N/A", "stored"),
        ("FW Version:            " + "1." * 200 + "1", "stored"),
        ("FW Version:            20.35.1012\x00", "stored"),
        ("PSID:                  N/A", "psid"),
        ("PSID:                  MT_" + "0" * 300, "psid"),
        ("PSID:                  MT\x1b[2J_0228", "psid"),
        ("FW Version(Running):   255.255.65535", "running"),
    ],
)
def test_flint_query_odd_values_are_none(line, field):
    parsed = P.parse_flint_query(line + "\n")
    assert parsed[field] is None


def test_flint_query_of_nothing_or_an_error():
    empty = {"stored": None, "running": None, "psid": None, "security": None}
    assert P.parse_flint_query("") == empty
    assert P.parse_flint_query("-E- Cannot open Device: 0000:0c:00.0. No such file\n") == empty


# -- devlink -j dev info ------------------------------------------------------------------------


CX7 = {
    "driver": "mlx5_core",
    "psid": "MT_0000000894",
    "running": "28.41.1000",
    "stored": "28.41.1000",
    "board_serial": "MT2314XZ00YA",
}


def test_devlink_dev_info_json_of_two_pfs_leaves_out_the_auxiliary_devices():
    parsed = P.parse_devlink_dev_info(capture("devlink", "handmade-cx7-two-pfs-dev-info.json"))
    assert parsed == {"0000:08:00.0": CX7, "0000:08:00.1": CX7}


def test_devlink_dev_info_stored_differs_from_running():
    parsed = P.parse_devlink_dev_info(capture("devlink", "handmade-cx7-stored-differs.json"))
    assert parsed["0000:08:00.0"] == {**CX7, "stored": "28.43.1014"}
    assert parsed["0000:08:00.1"] == {**CX7, "stored": "28.43.1014"}


def test_devlink_dev_info_a_failed_stored_query_is_no_version():
    parsed = P.parse_devlink_dev_info(capture("devlink", "handmade-cx7-stored-query-failed.json"))
    assert parsed["0000:08:00.0"] == {**CX7, "stored": None}
    assert parsed["0000:08:00.1"] == CX7


def test_devlink_dev_info_of_an_older_kernel_without_stored_or_serials():
    parsed = P.parse_devlink_dev_info(
        capture("devlink", "handmade-older-kernel-no-stored-no-serial.json")
    )
    assert parsed == {
        "0000:82:00.0": {
            "driver": "mlx5_core",
            "psid": "MT_0000000009",
            "running": "16.26.0100",
            "stored": None,
            "board_serial": None,
        }
    }


def test_devlink_dev_info_text_form_is_not_json():
    assert P.parse_devlink_dev_info(capture("devlink", "pirko-cx7-two-pfs-dev-info.txt")) == {}


@pytest.mark.parametrize(
    "doc",
    [
        [],
        {"info": []},
        {"info": {"pci/0000:08:00.0": "mlx5_core"}},
        {"info": {"pci/zz:08:00.0": {"driver": "mlx5_core"}}},
        {"info": {"usb/0000:08:00.0": {"driver": "mlx5_core"}}},
    ],
)
def test_devlink_dev_info_other_shapes_are_left_out(doc):
    assert P.parse_devlink_dev_info(json.dumps(doc)) == {}


def test_devlink_dev_info_a_handle_with_a_newline_is_no_pci_function():
    text = json.dumps({"info": {"pci/0000:08:00.0\n": {"driver": "mlx5_core"}}})
    assert P.parse_devlink_dev_info(text) == {}


def test_versions_in_look_alike_digits_are_none():
    arabic = "".join(chr(0x660 + int(c)) if c.isdigit() else c for c in "20.35.1012")
    assert P.parse_flint_query(f"FW Version:   {arabic}\n")["stored"] is None
    assert (
        P.parse_ethtool_driver(f"firmware-version: {arabic} (MT_0000000430)\n")["running"] is None
    )
    assert P.parse_ofed_info(f"MLNX_OFED_LINUX-{arabic}:\n") is None


def test_devlink_dev_info_odd_values_are_none():
    entry = {
        "driver": 5,
        "board.serial_number": "x" * 500,
        "versions": {
            "fixed": {"fw.psid": "N/A"},
            "running": {"fw.version": "28.41.1000\x1b[0m"},
            "stored": ["28.41.1000"],
        },
    }
    parsed = P.parse_devlink_dev_info(json.dumps({"info": {"pci/0000:08:00.0": entry}}))
    assert parsed == {
        "0000:08:00.0": dict.fromkeys(("driver", "psid", "running", "stored", "board_serial"))
    }


@pytest.mark.parametrize("text", ["", "{", "[" * 100000, "NaN", '{"info": {"pci/0000:08:00.0": '])
def test_devlink_dev_info_broken_json_is_nothing(text):
    assert P.parse_devlink_dev_info(text) == {}


# -- ethtool -i ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, expected",
    [
        (
            "wenxu-cx6dx-driver.txt",
            {"driver": "mlx5_core", "running": "22.28.1002", "psid": "MT_0000000430",
             "bdf": "0000:07:00.1"},
        ),
        (
            "notes-cx5-dell-oem-psid-driver.txt",
            {"driver": "mlx5_core", "running": "16.32.2004", "psid": "DEL0000000016",
             "bdf": "0000:ca:00.0"},
        ),
        (
            "notes-cx5-huawei-oem-psid-vm-driver.txt",
            {"driver": "mlx5_core", "running": "16.31.1014", "psid": "HUA0000000024",
             "bdf": "0000:00:07.0"},
        ),
        (
            "notes-cx3-mlx4-no-psid-driver.txt",
            {"driver": "mlx4_en", "running": "2.42.5000", "psid": None, "bdf": "0000:08:00.0"},
        ),
    ],
)  # fmt: skip
def test_ethtool_driver_with_and_without_psid(name, expected):
    assert P.parse_ethtool_driver(capture("ethtool", name)) == expected


@pytest.mark.parametrize(
    "line, field",
    [
        ("firmware-version: N/A", "running"),
        ("firmware-version: 22.28.1002 (MT_0000000430) trailing junk", "running"),
        ("firmware-version: 22.28.1002 (" + "M" * 100 + ")", "psid"),
        ("firmware-version: 22.28.1002 (MT\x07)", "psid"),
        ("bus-info: 0000:07:00.1/../../x", "bdf"),
        ("bus-info: N/A", "bdf"),
        ("driver: " + "d" * 300, "driver"),
        ("driver: mlx5\x1b[31m", "driver"),
    ],
)
def test_ethtool_driver_odd_values_are_none(line, field):
    assert P.parse_ethtool_driver(line + "\n")[field] is None


def test_ethtool_driver_bus_info_is_lower_case():
    assert P.parse_ethtool_driver("bus-info: 0000:CA:00.0\n")["bdf"] == "0000:ca:00.0"


def test_ethtool_driver_of_another_ethtool_output_is_nothing():
    parsed = P.parse_ethtool_driver(capture("ethtool", "ice-qsfp28-mellanox-dac-module.txt"))
    assert parsed == {"driver": None, "running": None, "psid": None, "bdf": None}


# -- the files the system section reads (ibdiag.sources.support_files) --------------------------


def _files(tmp_path, os_release: str, cmdline: str):
    from ibdiag.sources.support_files import read_support_files
    from ibdiag.sources.sysfs import SysfsReader

    trees = {name: tmp_path / name for name in ("sys", "proc", "rootfs")}
    for tree in trees.values():
        tree.mkdir()
    (trees["rootfs"] / "etc").mkdir()
    (trees["rootfs"] / "etc" / "os-release").write_text(os_release)
    (trees["proc"] / "cmdline").write_text(cmdline)
    return read_support_files({name: SysfsReader(str(tree)) for name, tree in trees.items()})


def test_os_release_of_rhel_9_and_the_cmdline(tmp_path):
    cmdline = capture("proc", "rocm-ubuntu-iommu-pt-cmdline.txt")
    found = _files(tmp_path, capture("os_release", "rhel-9.3.txt"), cmdline)
    assert found.os_release["NAME"] == "Red Hat Enterprise Linux"
    assert found.os_release["ID"] == "rhel" and found.os_release["VERSION_ID"] == "9.3"
    assert found.os_release["PRETTY_NAME"] == "Red Hat Enterprise Linux 9.3 (Plow)"
    assert found.os_release["REDHAT_BUGZILLA_PRODUCT_VERSION"] == "9.3"  # unquoted
    assert len(found.os_release) == 17  # every KEY=value line; the blank line is none
    assert found.cmdline == cmdline.rstrip("\n")  # the reader drops the final newline


def test_os_release_of_ubuntu_22_04(tmp_path):
    found = _files(tmp_path, capture("os_release", "ubuntu-22.04.5.txt"), "ro\n")
    assert found.os_release["ID"] == "ubuntu" and found.os_release["VERSION_ID"] == "22.04"
    assert found.os_release["VERSION_CODENAME"] == "jammy"
    assert found.os_release["PRETTY_NAME"] == "Ubuntu 22.04.5 LTS"
    assert len(found.os_release) == 12
