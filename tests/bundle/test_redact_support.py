"""Redaction of what the support catalogue adds to a bundle (issue 26): serials, users, the
kernel command line's paths, MACs and GUIDs in firmware and ip output, on real captures
(tests/captures/support/redact/SOURCES.md). For each field: the original is gone, one value gets
one token in every file that holds it, the parsers still read the redacted text, and redacting
the result again changes nothing."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import List

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ibdiag.bundle.redact import ALL_KINDS, DEFAULT_KINDS, KINDS, Redactor
from ibdiag.families.module import parse_module
from ibdiag.families.support.parsers import (
    parse_devlink_dev_info,
    parse_ethtool_driver,
    parse_flint_query,
)

TESTS = Path(__file__).resolve().parent.parent
CAPTURES = TESTS / "captures" / "support" / "redact"
MLXLINK = TESTS / "captures" / "mlxlink" / "mlxlink-ndr-osfp-healthy.json"


def capture(name: str) -> str:
    path = CAPTURES / name
    if not path.is_file():
        pytest.fail(f"capture {path} is missing (tests/captures/support/redact)")
    return path.read_text(encoding="utf-8")


def redacted(red: Redactor, text: str) -> str:
    """``text`` through ``red``; redacting the result again must change nothing."""
    out = red.text(text)
    assert red.text(out) == out, "re-redacting changed the text"
    return out


def gone(out: str, *originals: str) -> None:
    for original in originals:
        assert original.lower() not in out.lower(), original


def line_of(text: str, label: str) -> str:
    return next(line for line in text.splitlines() if label in line)


def value_of(text: str, label: str) -> str:
    return line_of(text, label).split(":", 1)[1].strip()


# -- the kinds ------------------------------------------------------------------------------


def test_all_is_every_kind_and_the_catalogue_and_cli_agree():
    from ibdiag.cli.support_bundle import _REDACT_KINDS, _redact_kinds
    from ibdiag.families.support.catalogue import REDACT_KINDS, load

    assert KINDS == ALL_KINDS == REDACT_KINDS == _REDACT_KINDS
    assert _redact_kinds("all") == KINDS
    assert _redact_kinds("serials,users") == ("serials", "users")
    assert set(DEFAULT_KINDS) < set(KINDS)
    # every kind an item of the catalogue names is one the Redactor knows
    named = {kind for item in load().item for kind in item.redact}
    assert named <= set(KINDS) and {"serials", "users", "paths"} <= named


# -- serials ------------------------------------------------------------------------------


def test_devlink_dev_info_text_serials_each_one_token():
    raw = capture("pirko-cx7-devlink-dev-info.txt")
    out = redacted(Redactor(kinds=ALL_KINDS), raw)
    gone(out, "MT2314XZ00YA", "e4397f872caeed218000846daa7d2f49", "MLNXS0D0F")
    serials = re.findall(r"^\s+serial_number (\S+)$", out, re.M)
    boards = re.findall(r"board\.serial_number (\S+)", out)
    uids = re.findall(r"function\.uid (\S+)", out)
    assert len(set(serials)) == 1 and len(set(boards)) == 1  # the two PFs: one board
    assert len(set(uids)) == 2  # one UID per function, each replaced whole
    assert len(set(serials + boards + uids)) == 4
    assert all(re.fullmatch(r"serial-\d+", token) for token in serials + boards + uids)
    assert out.count("fw.psid MT_0000000894") == 2 and out.count("fw.version 28.41.1000") == 4


def test_board_serial_same_token_in_devlink_json_and_lspci_vpd_and_parsers_read_it():
    red = Redactor(kinds=ALL_KINDS)
    devlink_raw = capture("handmade-devlink-j-dev-info-same-board.json")
    lspci_raw = capture("gpud-h100-lspci-vvv-cx7-1a.txt")
    devlink = redacted(red, devlink_raw)
    lspci = redacted(red, lspci_raw)
    for out in (devlink, lspci):
        gone(out, "MT2340J88735", "d610e4f45c66ee118000a088c2b8a0c4", "a088c2b8a0c4")
    entry = json.loads(devlink)["info"]["pci/0000:1a:00.0"]
    assert entry["board.serial_number"] == value_of(lspci, "[SN] Serial number")
    assert entry["function.uid"] == value_of(lspci, "[VU] Vendor specific")
    assert entry["serial_number"] == value_of(lspci, "[V3] Vendor specific")
    assert len({entry["board.serial_number"], entry["function.uid"], entry["serial_number"]}) == 3
    # what identifies no board stays: part number, the VPD's layout and PCIe fields
    assert "[PN] Part number: MCX75310AAS-NEAT" in lspci
    assert "[VA] Vendor specific: MLX:MN=MLNX:CSKU=V2:UUID=V3:PCI=V0:MODL=CX75310AA" in lspci
    assert "[V0] Vendor specific: PCIeGen5 x16" in lspci
    assert len(lspci.splitlines()) == len(lspci_raw.splitlines())
    before, after = parse_devlink_dev_info(devlink_raw), parse_devlink_dev_info(devlink)
    assert after["0000:1a:00.0"] == {
        **before["0000:1a:00.0"],
        "board_serial": entry["board.serial_number"],
    }
    assert after["0000:1a:00.0"]["psid"] == "MT_0000000838"


def test_nvidia_smi_serial_and_uuid_keep_their_shape_and_na_stays():
    red = Redactor(kinds=ALL_KINDS)
    raw = capture("handmade-nvidia-smi-q-serial-and-process.txt")
    out = redacted(red, raw)
    gone(out, "1654123038646", "370465f5-30e0-6877-b85c-16729f41b90f", "alice")
    assert re.fullmatch(r"serial-\d+", value_of(out, "Serial Number"))
    uuid = value_of(out, "GPU UUID")
    assert re.fullmatch(r"GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", uuid)
    assert value_of(out, "Process ID") == "48213"
    process = value_of(out, "            Name")
    assert re.fullmatch(r"/home/user-\d+/miniconda3/envs/train/bin/python", process)
    # a GeForce has no serial: N/A is kept, as is everything but the identifiers
    plain = redacted(red, capture("gpud-rtx4090-nvidia-smi-q-first-gpu.txt"))
    assert value_of(plain, "Serial Number") == "N/A"
    assert value_of(plain, "GPU UUID") == uuid  # the same GPU, the same token
    assert "Board ID                              : 0x100" in plain
    # nvidia-smi -L and report text name the GPU without a label
    listed = redacted(
        red, "GPU 0: NVIDIA GeForce RTX 4090 (UUID: GPU-370465f5-30e0-6877-b85c-16729f41b90f)"
    )
    assert listed.endswith(f"(UUID: {uuid})")


def test_cable_serial_same_token_in_ethtool_m_and_mlxlink_and_the_module_parser_reads_it():
    red = Redactor(kinds=ALL_KINDS)
    ethtool = redacted(red, capture("handmade-ethtool-m-vendor-lines.txt"))
    raw_json = MLXLINK.read_text(encoding="utf-8")
    mlxlink = redacted(red, raw_json)
    gone(ethtool + mlxlink, "CWJH05025502589")
    token = value_of(ethtool, "Vendor SN")
    assert re.fullmatch(r"serial-\d+", token)
    identity = parse_module(mlxlink).identity
    assert identity is not None and identity.serial == token
    before = parse_module(raw_json).identity
    assert before is not None
    assert identity.model_copy(update={"serial": before.serial}) == before
    assert value_of(ethtool, "Vendor PN") == "T-F4GS-BV0"
    # the module's facts, as report.json holds them, get the same token too
    facts = redacted(red, json.dumps({"identity": before.model_dump()}, indent=1))
    assert json.loads(facts)["identity"]["serial"] == token


def test_a_serial_learned_from_a_label_is_replaced_where_a_report_shows_it_unlabelled():
    red = Redactor(kinds=("serials",))
    red.learn(capture("gpud-h100-lspci-vvv-cx7-1a.txt"))
    cell = "<td>MT2340J88735</td><td>MT_0000000838</td>"
    out = redacted(red, cell)
    assert re.fullmatch(r"<td>serial-\d+</td><td>MT_0000000838</td>", out)


@pytest.mark.parametrize(
    "line",
    [
        "    Serial Number                         : N/A",
        "\tVendor SN                                 : Not Available",
        '"serial_number": "0000000000"',
        "fw.psid MT_0000000894 fw.version 28.41.1000",
        "uuid 3f2504e0-4f89-11d3-9a0c-0305e82c3301 (a boot id: no label)",
        "Capabilities: [1b0] Device Serial Number 00-00-00-00-00-00-00-00",
    ],
)
def test_serial_look_alikes_are_kept(line):
    red = Redactor(kinds=ALL_KINDS)
    assert red.text(line) == line


@pytest.mark.parametrize(
    "name",
    [
        "pirko-cx7-devlink-dev-info.txt",
        "handmade-devlink-j-dev-info-same-board.json",
        "gpud-h100-lspci-vvv-cx7-1a.txt",
        "handmade-nvidia-smi-q-serial-and-process.txt",
        "handmade-ethtool-m-vendor-lines.txt",
        "ironic-mstflint-q.txt",
        "handmade-limits.conf",
        "handmade-cmdline-uuid-nfsroot.txt",
        "handmade-ip-d-address-ipoib-and-roce.txt",
    ],
)
def test_an_output_inside_report_json_or_an_html_page_gets_the_same_tokens(name):
    """report.json holds each command's output as one JSON string (lines joined by \\n,
    quotes escaped), report.html as escaped text: the labels are found there too, by a
    Redactor that never saw the plain text."""
    import html

    raw = capture(name)
    plain = Redactor(kinds=ALL_KINDS, hostnames=["gpu042"]).text(raw)
    assert plain != raw
    in_json = redacted(Redactor(kinds=ALL_KINDS, hostnames=["gpu042"]), json.dumps({"s": raw}))
    assert json.loads(in_json)["s"] == plain
    in_html = redacted(Redactor(kinds=ALL_KINDS, hostnames=["gpu042"]), html.escape(raw))
    assert html.unescape(in_html) == plain


SERIAL_LINES = [
    "  board.serial_number {v}\n",
    '{{"info": {{"pci/0000:1a:00.0": {{"board.serial_number": "{v}"}}}}}}\n',
    "\t\t\t[SN] Serial number: {v}   \n",
    "    Serial Number                         : {v}\n",
    "\tVendor SN                                 : {v}\n",
    '\t\t\t\t"Vendor Serial Number" : "{v}",\n',
]


@settings(max_examples=200, deadline=None)
@given(
    st.from_regex(r"[A-Z][A-Z0-9]{5,19}", fullmatch=True).filter(
        lambda v: any(c.isdigit() for c in v)
    ),
    st.sampled_from(SERIAL_LINES),
    st.sampled_from(SERIAL_LINES),
)
def test_property_a_serial_is_gone_and_has_one_token_in_any_two_tools(value, first, second):
    red = Redactor(kinds=("serials",))
    one = red.text(first.format(v=value))
    two = red.text(second.format(v=value))
    assert value not in one and value not in two
    tokens = set(re.findall(r"serial-\d+", one + two))
    assert tokens == {"serial-1"}
    assert red.text(one) == one and red.text(two) == two
    assert red.text(f"<td>{value}</td>") == "<td>serial-1</td>"  # learned: replaced anywhere


# -- GUIDs and MACs ------------------------------------------------------------------------


def test_flint_guid_same_token_as_sysfs_node_guid_and_the_ipoib_address():
    red = Redactor(kinds=ALL_KINDS)
    raw = capture("ironic-mstflint-q.txt")
    flint = redacted(red, raw)
    node_guid = redacted(red, "043f:7203:00f0:4c46\n")  # sysfs node_guid of the same HCA
    ip = redacted(red, capture("handmade-ip-d-address-ipoib-and-roce.txt"))
    base_guid = value_of(flint, "Base GUID").split()[0]
    assert base_guid.startswith("feed") and node_guid.strip().replace(":", "") == base_guid
    ipoib = re.search(r"link/infiniband (\S+)", ip)
    assert ipoib is not None
    assert ipoib.group(1).replace(":", "").endswith(base_guid)  # the port GID's GUID
    assert ipoib.group(1).startswith("80:00:02:08:fe:80:00:00:00:00:00:00:")
    gone(flint + node_guid + ip, "043f720300f04c46", "043f:7203:00f0:4c46", "04:3f:72:03:00:f0")
    assert parse_flint_query(flint) == parse_flint_query(raw)


def test_flint_base_mac_with_macs_is_the_mac_token_of_ip_link_and_enx_altname():
    red = Redactor(kinds=ALL_KINDS)
    flint = redacted(red, capture("ironic-mstflint-q.txt"))
    ip = redacted(red, capture("handmade-ip-d-address-ipoib-and-roce.txt"))
    base_mac = value_of(flint, "Base MAC").split()[0]
    ether = re.search(r"link/ether (\S+)", ip)
    altname = re.search(r"altname enx(\S+)", ip)
    assert ether is not None and altname is not None
    assert ether.group(1).replace(":", "") == base_mac == altname.group(1)
    assert base_mac.startswith("02ed")
    gone(flint + ip, "043f72f04c46", "04:3f:72:f0:4c:46")
    assert "brd ff:ff:ff:ff:ff:ff" in ip and "link/loopback 00:00:00:00:00:00" in ip


def test_flint_base_mac_without_macs_follows_the_guid_map_so_it_cannot_give_the_guid_away():
    red = Redactor(kinds=("guids",))
    raw = capture("ironic-mstflint-q.txt")
    flint = redacted(red, raw)
    guid = value_of(flint, "Base GUID").split()[0]
    mac = value_of(flint, "Base MAC").split()[0]
    gone(flint, "043f72f04c46", "f04c46")
    assert len(mac) == 12 and mac == guid[:6] + guid[10:]  # the same EUI, as the original's
    assert parse_flint_query(flint) == parse_flint_query(raw)
    rows = {row["original"]: row["label"] for row in red.table()}
    assert rows["043f72f04c46"] == rows["043f720300f04c46"] == "guid-1"
    # only the kinds asked for: an Ethernet MAC is the macs kind's (README: all includes it)
    assert red.text("link/ether 04:3f:72:f0:4c:46") == "link/ether 04:3f:72:f0:4c:46"


def test_ip_d_link_ipoib_child_guid_and_ip_d_address_inet():
    red = Redactor(kinds=ALL_KINDS)
    link_raw = capture("kheib-ipoib-child-ip-d-link.txt")
    link = redacted(red, link_raw)
    sysfs_guid = redacted(red, "248a:0703:00a3:1964")  # the port's node_guid in sysfs
    gone(link, "24:8a:07:03:00:a3:19:64")
    hw = re.search(r"link/infiniband (\S+) brd (\S+)", link)
    assert hw is not None
    assert hw.group(1) == "00:00:1f:e3:fe:80:00:00:00:00:00:00:" + ":".join(
        sysfs_guid.replace(":", "")[i : i + 2] for i in range(0, 16, 2)
    )
    assert hw.group(2) == "00:ff:ff:ff:ff:12:40:1b:80:01:00:00:00:00:00:00:ff:ff:ff:ff"
    assert changed_lines(link_raw, link) == 1  # pkey, mode and the rest as they were
    ip = redacted(red, capture("handmade-ip-d-address-ipoib-and-roce.txt"))
    gone(ip, "10.0.0.11", "10.0.0.255", "172.16.40.23", "fd12:3456:789a:7::23")
    assert "inet 127.0.0.1/8 scope host lo" in ip and "inet6 ::1/128 scope host" in ip
    assert re.search(r"inet 198\.18\.\d+\.\d+/24 brd 198\.18\.\d+\.\d+ scope global ibp3s0", ip)
    assert "ipoib pkey  0xffff mode  datagram" in ip


def changed_lines(before: str, after: str) -> int:
    return sum(a != b for a, b in zip(before.splitlines(), after.splitlines()))


def test_ethtool_i_is_left_as_the_parser_reads_it():
    raw = capture("wenxu-cx6dx-ethtool-i.txt")
    out = redacted(Redactor(kinds=ALL_KINDS), raw)
    assert out == raw and parse_ethtool_driver(out)["psid"] == "MT_0000000430"


# -- users ---------------------------------------------------------------------------------


def test_limits_conf_users_and_groups_and_the_same_user_in_a_home_path():
    red = Redactor(kinds=ALL_KINDS)
    raw = capture("handmade-limits.conf")
    limits = redacted(red, raw)
    nccl = redacted(red, capture("handmade-nccl.conf"))
    gone(limits + nccl, "jdoe", "physics", "admins", "student", "faculty", "mrossi")
    user = re.search(r"^(user-\d+)\s+hard\s+memlock\s+unlimited$", limits, re.M)
    assert user is not None
    assert f"NCCL_TOPO_FILE=/home/{user.group(1)}/topo/gpu042.xml" in nccl
    assert re.search(r"NCCL_DEBUG_FILE=/users/user-\d+/nccl\.%h\.%p", nccl)
    assert re.search(r"^@group-\d+\s+soft\s+nofile\s+65536$", limits, re.M)
    assert re.search(r"^%group-\d+\s+-\s+maxlogins\s+10$", limits, re.M)
    # what names nobody stays: *, root, the header, and the memlock settings themselves
    assert "*               hard    memlock         unlimited" in limits
    assert "#root            hard    core            100000" in limits
    assert "#<domain>      <type>  <item>         <value>" in limits
    assert len(limits.splitlines()) == len(raw.splitlines())


def test_the_invoking_user_is_replaced_wherever_it_appears_as_a_word():
    red = Redactor(kinds=("users",), users=["alice", "root", "ab", "slurm", "Ubuntu"])
    out = redacted(red, "run by alice in /scratch/alice/job; malice; root; ab; slurm; Ubuntu")
    assert out == "run by user-1 in /scratch/user-1/job; malice; root; ab; slurm; Ubuntu"
    # a service account is still replaced where a home directory names it
    assert red.text("/home/ubuntu/.bashrc") == "/home/user-2/.bashrc"
    assert Redactor(kinds=("hostnames",), users=["alice"]).text("alice") == "alice"


# -- the kernel command line --------------------------------------------------------------


def test_cmdline_paths_uuids_server_and_addresses():
    red = Redactor(kinds=ALL_KINDS, hostnames=["gpu042"])
    raw = capture("handmade-cmdline-uuid-nfsroot.txt")
    out = redacted(red, raw)
    gone(
        out,
        "7c9e6679-7425-40de-944b-e07fc1f90ae7",
        "b1f0a3c2-5d4e-4f6a-8b7c-9d0e1f2a3b4c",
        "nfs01",
        "hpc.example.org",
        "/exports/nodes",
        "gpu042",
        "10.20.30.",
    )
    args = dict(arg.split("=", 1) for arg in out.split() if "=" in arg)
    assert args["BOOT_IMAGE"] == "/boot/vmlinuz-5.15.0-101-generic"  # the kernel release stays
    assert args["init"] == "/sbin/init" and args["iommu"] == "pt"
    assert re.fullmatch(r"UUID=0{8}-0{4}-0{4}-0{4}-0{11}1", args["root"])
    assert re.fullmatch(r"UUID=0{8}-0{4}-0{4}-0{4}-0{11}2", args["resume"])
    assert re.fullmatch(r"host-\d+\.domain-\d+:/path-1,vers=3,tcp", args["nfsroot"])
    # the same command line in report.json (a JSON string) and the kernel log: the same tokens
    again = redacted(red, json.dumps({"cmdline": raw.strip()}))
    assert json.loads(again)["cmdline"] == out.strip()
    dmesg = redacted(red, "[    0.000000] Command line: " + raw)
    assert dmesg == "[    0.000000] Command line: " + out


def test_cmdline_keeps_device_nodes_and_images_and_only_touches_command_lines():
    red = Redactor(kinds=ALL_KINDS)
    line = "BOOT_IMAGE=(hd0,gpt2)/vmlinuz-6.1.0 root=/dev/mapper/vg-root ro initrd=/initrd.img"
    assert red.text(line) == line
    other = "NCCL_SOCKET_IFNAME=ib0 NCCL_TOPO_DUMP_FILE=/tmp/topo.xml"  # not a command line
    assert red.text(other) == other
    assert red.summary()["paths"] == 0


# -- the table and the summary -------------------------------------------------------------


def test_summary_and_table_count_the_new_kinds():
    red = Redactor(kinds=ALL_KINDS, users=["alice"])
    for name in (
        "pirko-cx7-devlink-dev-info.txt",
        "handmade-limits.conf",
        "handmade-cmdline-uuid-nfsroot.txt",
    ):
        red.text(capture(name))
    summary = red.summary()
    assert summary["serials"] == 4 + 2  # 4 devlink values, 2 file system UUIDs
    assert summary["users"] == 3 + 4  # alice, jdoe, ftp; @student @faculty @physics %admins
    assert summary["paths"] == 1
    labels = {row["label"] for row in red.table()}
    assert {"serial-1", "uuid-1", "uuid-2", "user-1", "group-1", "path-1"} <= labels
    assert set(summary) == set(KINDS)


def originals_everywhere() -> List[str]:
    """Every identifying value of the captures the end-to-end test's stubs print."""
    return [
        "MT2340J88735",
        "d610e4f45c66ee118000a088c2b8a0c4",
        "043f720300f04c46",
        "043f72f04c46",
        "CWJH05025502589",
        "7c9e6679-7425-40de-944b-e07fc1f90ae7",
        "/exports/nodes/gpu042",
        "nfs01.hpc.example.org",
        "jdoe",
        "mrossi",
        "physics",
        "10.0.0.11",
        "172.16.40.23",
        "24:8a:07:03:00:a3:19:64",
    ]


def test_originals_list_matches_the_captures():
    """The end-to-end test greps for these: each is really in a capture it uses."""
    texts = "".join(capture(name) for name in os.listdir(CAPTURES) if name != "SOURCES.md")
    texts += MLXLINK.read_text(encoding="utf-8")
    for value in originals_everywhere():
        assert value in texts, value


# -- end to end: ibdiag collect --redact all on a stub node --------------------------------


@pytest.fixture
def node(tmp_path, run_cli, monkeypatch):
    import stubs as S
    from standard_node import DEVLINK_HEALTHY, FW_SYNDROME_BDF, HEALTHY_BDF, Node

    made = Node(tmp_path, run_cli, bdfs=(FW_SYNDROME_BDF, HEALTHY_BDF))
    monkeypatch.setenv("PATH", made.stubs.path)
    monkeypatch.delenv("IBDIAG_DEBUG", raising=False)
    monkeypatch.setenv("SUDO_USER", "mrossi")  # the invoking user, in nccl.conf's /users/ path
    made.healthy_tools()  # mlxlink prints the cable serial CWJH05025502589
    made.stubs.add(
        "mstflint",
        S.by_args(
            {f"-d {FW_SYNDROME_BDF} q": S.prints(CAPTURES / "ironic-mstflint-q.txt")},
            S.fails("-E- no", 1),
        ),
    )
    made.stubs.add(
        "devlink",
        S.by_args(
            {
                "-j health show": S.prints(DEVLINK_HEALTHY),
                "-j dev info": S.prints(CAPTURES / "handmade-devlink-j-dev-info-same-board.json"),
            },
            S.fails("devlink: unknown", 1),
        ),
    )
    assert HEALTHY_BDF == "0000:1a:00.0"  # the devlink capture's and the lspci block's
    made.stubs.add("lspci", S.prints(CAPTURES / "gpud-h100-lspci-vvv-cx7-1a.txt"))
    made.stubs.add(
        "ip",
        S.by_args(
            {
                "-d -s link show": S.prints(CAPTURES / "kheib-ipoib-child-ip-d-link.txt"),
                "-d address show": S.prints(CAPTURES / "handmade-ip-d-address-ipoib-and-roce.txt"),
            },
            S.fails("ip: unknown", 1),
        ),
    )
    # mlx5_0 is the HCA mstflint answers for: its sysfs node_guid is the Base GUID
    with open(os.path.join(made.sysfs, "class", "infiniband", "mlx5_0", "node_guid"), "w") as f:
        f.write("043f:7203:00f0:4c46\n")
    with open(os.path.join(made.procfs, "cmdline"), "w") as f:
        f.write(capture("handmade-cmdline-uuid-nfsroot.txt"))
    with open(os.path.join(made.procfs, "sys", "kernel", "hostname"), "w") as f:
        f.write("gpu042\n")
    etc = tmp_path / "rootfs" / "etc"
    (etc / "security").mkdir(parents=True)
    (etc / "security" / "limits.conf").write_text(capture("handmade-limits.conf"))
    (etc / "nccl.conf").write_text(capture("handmade-nccl.conf"))
    return made


def test_collect_redact_all_leaves_no_original_in_the_bundle_and_it_grades(node, tmp_path):
    import tarfile

    out = tmp_path / "out"
    result = node.run_cli(
        "collect", "--sysfs", node.sysfs, "--procfs", node.procfs,
        "--rootfs", str(tmp_path / "rootfs"), "--tarball", "--redact", "all", "-o", str(out),
    )  # fmt: skip
    assert result.exit_code == 0, result.stdout + result.stderr
    (tarball,) = out.glob("ibdiag-*.tar.gz")
    extracted = tmp_path / "extracted"
    with tarfile.open(tarball) as tar:
        tar.extractall(extracted)  # noqa: S202 - our own bundle, written just now
    files = [path for path in extracted.rglob("*") if path.is_file()]
    names = "\n".join(str(path.relative_to(extracted)) for path in extracted.rglob("*"))
    assert any("support-mstflint" in name or "mstflint" in name for name in names.split("\n"))
    everything = names.lower() + "".join(
        path.read_bytes().decode("utf-8", "replace").lower() for path in files
    )
    originals = [*originals_everywhere(), "gpu042", "mrossi"]
    left = [value for value in originals if value.lower() in everything]
    where = {v: [p.name for p in files if v.lower() in p.read_text(errors="replace").lower()]
             for v in left}  # fmt: skip
    assert not left, where
    # what was collected is there, redacted: the tokens of each kind
    manifest = json.loads(next(p for p in files if p.name == "manifest.json").read_text())
    replaced = manifest["redaction"]["replaced"]
    assert set(replaced) == set(KINDS)
    assert all(replaced[kind] >= 1 for kind in KINDS), replaced
    rows = {(row["item"], row["target"]): row["status"] for row in manifest["items"]}
    for item in ("mstflint_query", "devlink_dev_info", "lspci", "ip_link", "ip_address"):
        assert "collected" in {s for (i, _), s in rows.items() if i == item}, (item, rows)
    mapping = json.loads(
        (out / (tarball.name[: -len(".tar.gz")] + ".redaction-map.json")).read_text()
    )
    assert {row["original"] for row in mapping} >= {"MT2340J88735", "mrossi", "CWJH05025502589"}
    report = node.run_cli("report", str(tarball), "--json")
    assert report.exit_code in (0, 1, 2), report.stdout + report.stderr
    snapshot = json.loads(report.stdout)["snapshot"]
    firmware = {fw["hca"]: fw for fw in snapshot["facts"]["support"]["firmware"]}
    assert firmware["mlx5_0"]["psid"] == "MT_0000000228"  # mstflint q, re-read from the bundle
    assert re.fullmatch(r"serial-\d+", firmware["mlx5_1"]["board_serial"])
