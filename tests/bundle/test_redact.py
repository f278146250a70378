"""Redaction of support bundles: real captures from tests/fixtures, false positives,
consistency across files and spellings, and properties (idempotence, no original left)."""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path

import pytest
from conftest import FIXTURES_DIR
from hypothesis import given, settings
from hypothesis import strategies as st

from ibdiag.bundle.redact import Redactor

FIXTURES = Path(FIXTURES_DIR)


def capture(relative: str) -> str:
    path = FIXTURES / relative
    if not path.is_file():
        pytest.fail(f"capture {path} is missing: the tests read the captures in tests/fixtures")
    return path.read_text(encoding="utf-8", errors="replace")


def changed_lines(before: str, after: str):
    assert len(before.splitlines()) == len(after.splitlines())
    return [(a, b) for a, b in zip(before.splitlines(), after.splitlines()) if a != b]


# The sysfs captures live in tests/scenarios/<name>/root (symlinks restored); files are verbatim.
HCA_SYSFS = (
    "../scenarios/hwloc-tacc-stampede-c412-603-connectx3-mlx4-fdr/root/sys/devices/pci0000:80/"
    "0000:80:02.2/0000:82:00.0/infiniband/mlx4_0"
)


# -- real captures ---------------------------------------------------------------------------


def test_ibstat_guids_replaced_in_shape_and_nothing_else():
    raw = capture("ibstat/gpud-ibstat-h100-cx7-roce-all-active.txt")
    red = Redactor()
    out = red.text(raw)
    assert "0xa088c20300e3142a" not in out and "0xa288c2fffee3142a" not in out
    for before, after in changed_lines(raw, out):
        assert re.search(r"GUID: 0x[0-9a-f]{16}$", after), after
        assert before.split(":")[0] == after.split(":")[0]
    assert "Port GUID: 0x0000000000000000" in out  # "no GUID" is kept
    assert "Firmware version: 28.39.1002" in out
    # equal values get equal tokens, different values different ones
    pairs = set(zip(re.findall(r"GUID: (\S+)", raw), re.findall(r"GUID: (\S+)", out)))
    assert len({a for a, _ in pairs}) == len({b for _, b in pairs}) == len(pairs)
    assert red.summary()["guids"] == len(
        set(re.findall(r"0x[0-9a-f]{16}", raw)) - {"0x" + "0" * 16}
    )


def test_ibstatus_gid_keeps_prefix_and_full_form():
    raw = capture("ibstatus/gpud-ibstatus-a100-azure-8xHDR-plus-eth-40G.txt")
    out = Redactor().text(raw)
    gids = re.findall(r"default gid:\s+(\S+)", out)
    assert gids and all(
        re.fullmatch(r"fe80:0000:0000:0000:feed:[0-9a-f]{4}:[0-9a-f]{4}:[0-9a-f]{4}", g)
        for g in gids
        if g != "unknown"
    )
    assert "5dff" not in out
    for before, after in changed_lines(raw, out):
        assert "default gid" in before and "default gid" in after
    assert "rate:            200 Gb/sec (4X HDR)" in out
    assert "base lid:        0x" in out


def test_sysfs_node_guid_and_gid_share_the_guid_mapping():
    node_guid = capture(f"{HCA_SYSFS}/node_guid")  # 0002:c903:00f9:bfa0
    gid0 = capture(f"{HCA_SYSFS}/ports/1/gids/0")  # fe80:...:0002:c903:00f9:bfa1
    gid1 = capture(f"{HCA_SYSFS}/ports/1/gids/1")  # all zeros
    red = Redactor()
    out_guid = red.text(node_guid)
    out_gid0 = red.text(gid0)
    assert re.fullmatch(r"feed:0000:0000:0001\n?", out_guid)
    assert re.fullmatch(r"fe80:0000:0000:0000:feed:0000:0000:0002\n?", out_gid0)
    assert red.text(gid1) == gid1
    # the port GUID, met in ibstat's 0x form later, gets the GID's interface id
    assert red.text("Port GUID: 0x0002c90300f9bfa1") == "Port GUID: 0xfeed000000000002"
    assert red.text("Node GUID: 0x0002c90300f9bfa0") == "Node GUID: 0xfeed000000000001"


def test_dmesg_hostnames_and_timestamps():
    raw = capture("dmesg/azurehpc-health-checks-syslog-ib6-link-flapping.txt")
    red = Redactor(hostnames=["jplc7eb7-vm-0.internal.cloudapp.net"])
    out = red.text(raw)
    assert "jplc7eb7" not in out
    for before, after in changed_lines(raw, out):
        assert after == before.replace("jplc7eb7-vm-0", "host-1")
    assert out.splitlines()[0].startswith("Aug 17 00:00:24 host-1 systemd[1]:")
    kmsg = capture("dmesg/gpud-kmsg-matcher-mlx5-pcie-power-module-hightemp-access-reg-fail.txt")
    out = Redactor(hostnames=["ny2g1r12hh2"]).text(kmsg)
    assert "ny2g1r12hh2" not in out and "host-1 kernel: mlx5_core 0000:5c:00.0:" in out


@pytest.mark.parametrize(
    "relative",
    [
        "dmesg/cx5-sriov-enable-pf1-pci_enable_sriov-failed-eio-unknown-header-7f.txt",
        "dmesg/gpud-h100-boot-mlx5-insufficient-pcie-power-cable-unplugged-link-down.txt",
        "dmesg/tinycore-redpill-issue9-connectx4lx-probe-failed-handle_hca_cap-einval.txt",
        "dmesg/kernel-commit-0e2909c6-mlx5-cmd_work_handler-failed-alloc-command-entry-hung-task-aarch64.txt",
        "dmesg/netdev-2020-s390-mlx5-health-miss-count-cmd-timeouts-leak.txt",
        "perfquery/infiniband_exporter-x-hca-edr-lid133.txt",
        "perfquery/infiniband_exporter-E-rcverr-switch-lid1719-port2.txt",
        "ethtool/ethq-connectx4-mlx5-kernel4.15-ethtool-S-full.txt",
        "lspci/gpud-h100-lspci-vvv-mellanox-8xcx7-2xcx6dx-blocks.txt",
        "nvidia_smi_topo/dgx-a100-10nic-pxb-pairs-kernel5.4.txt",
        "perftest/superbench-ib_write_bw-loopback-all-sizes-azure-hdr-interleaved.txt",
    ],
)
def test_no_false_positives_on_captures_without_identifiers(relative):
    """PCI addresses, versions, rates, counters, timestamps, LIDs, masks, pointers."""
    raw = capture(relative)
    red = Redactor(kinds=("hostnames", "ips", "guids", "macs"))
    assert red.text(raw) == raw
    assert red.mapping == {}


def test_perfquery_header_and_file_name():
    raw = capture("perfquery/infiniband_exporter-x-switch-edr-0x506b4b03005c2740.txt")
    red = Redactor()
    assert red.text(raw) == raw  # "Lid 2052 port 1 (CapMask: 0x5300 ...)": nothing to hide
    name = red.name("commands/perfquery-0x506b4b03005c2740.txt")
    assert name == "commands/perfquery-0xfeed000000000001.txt"
    assert red.text("switchguid=0x506b4b03005c2740") == "switchguid=0xfeed000000000001"


def test_nccl_ipv4_and_ipv4_mapped_gids_are_consistent():
    raw = capture(
        "nccl_tests/nccl-issue1698-roce-mlx5_10-net-ib-completion-status12-vendor-err-129.txt"
    )
    red = Redactor(hostnames=["mycl-g2"])
    out = red.text(raw)
    for value in ("192.168.3.5", "192.168.6.3", "192.168.6.5", "mycl-g2"):
        assert value not in out
    local = red.mapping["192.168.6.3"] if "192.168.6.3" in red.mapping else None
    mapped = red.mapping["::ffff:192.168.6.3"]
    assert mapped.startswith("::ffff:198.18.")
    assert local is None or mapped == "::ffff:" + local
    assert "remoteGids::ffff:198.18." in out
    assert "<53908> with status=12 opcode=129 len=1048576" in out


def test_perftest_decimal_gid_and_peer_address():
    raw = capture("perftest/oci-oke-ib_write_bw-roce-mlx5_5-4qp-98gbps.txt")
    red = Redactor()
    out = red.text(raw)
    gids = set(re.findall(r"GID: (\S+)", out))
    assert gids and all(g.startswith("00:00:00:00:00:00:00:00:00:00:255:255:198:18:") for g in gids)
    lat = capture("perftest/mlx4-connectx3-qdr-ib_write_lat-a-20000iter.txt")
    out = red.text(lat)
    assert "192.168.1.60" not in out and "--iter 20000 198.18." in out
    assert "VAddr 0x007f10cb874000" in out  # a user-space pointer, not a GUID


def test_lspci_device_serial_number_is_the_guid_in_dashes():
    red = Redactor()
    guid = red.text("b859:9f03:00d4:0a10")
    dsn = red.text("\tCapabilities: [1c0 v1] Device Serial Number B8-59-9F-03-00-D4-0A-10\n")
    assert guid == "feed:0000:0000:0001"
    assert dsn == "\tCapabilities: [1c0 v1] Device Serial Number FE-ED-00-00-00-00-00-01\n"
    # a MAC (6 bytes) or a longer dash run is not a serial number
    assert red.text("b8-59-9f-03-00-d4") == "b8-59-9f-03-00-d4"
    assert red.text("01-02-03-04-05-06-07-08-09") == "01-02-03-04-05-06-07-08-09"


def test_ibnetdiscover_guids_and_node_descriptions():
    raw = capture("ibnetdiscover/infiniband_exporter-ibnetdiscover-p-hdr.txt")
    red = Redactor(hostnames=["worker20"])
    out = red.text(raw)
    assert not re.search(r"0x(?!feed)[0-9a-f]{16}", out)
    assert "'host-1 mlx5_3'" in out and "worker20" not in out
    assert "4x HDR - SW    51 79 0xfeed" in out
    assert red.summary()["hostnames"] == 1


def test_ibv_devinfo_colon_guids_and_flags():
    raw = capture("ibv_devinfo/heioy-books-connectx3-mlx4-port2-verbose-down-polling.txt")
    out = Redactor().text(raw)
    assert "node_guid:\t\t\tfeed:0000:0000:0001" in out
    assert "7cfe:9003" not in out
    assert "0x5000401600000000" in out  # device_cap_exp_flags, a mask


# -- behaviour -------------------------------------------------------------------------------


def test_same_value_same_token_across_calls_and_spellings():
    red = Redactor()
    first = red.text("Node GUID: 0xB8599F0300D40A10 peer 10.1.2.3")
    second = red.text("node_guid b859:9f03:00d4:0a10 gid fe80::b859:9f03:d4:a10 from 10.1.2.3")
    assert first == "Node GUID: 0xFEED000000000001 peer 198.18.0.1"
    assert second == "node_guid feed:0000:0000:0001 gid fe80::feed:0:0:1 from 198.18.0.1"
    assert red.text("10.1.2.4") == "198.18.0.2"
    assert red.summary() == {"hostnames": 0, "ips": 2, "guids": 1}
    rows = {r["original"]: r["label"] for r in red.table()}
    assert rows["10.1.2.3"] == "ip4-1" and rows["10.1.2.4"] == "ip4-2"
    assert rows["0xB8599F0300D40A10"] == rows["fe80::b859:9f03:d4:a10"] == "guid-1"


def test_ipv6_forms():
    red = Redactor()
    assert red.text("addr 2001:db8:5::17/64") == "addr 2001:db8::1/64"
    assert red.text("fe80:0000:0000:0000:0000:0000:0000:0000") == "fe80:" + "0000:" * 6 + "0000"
    assert (
        red.text("::1 ::ffff:127.0.0.1 ff12:401b:ffff::1")
        == "::1 ::ffff:127.0.0.1 ff12:401b:ffff::1"
    )
    roce = red.text("0000:0000:0000:0000:0000:ffff:0ae0:04e9")  # sysfs RoCE GID of 10.224.4.233
    assert roce == "0000:0000:0000:0000:0000:ffff:c612:0001"
    assert red.text("10.224.4.233") == "198.18.0.1"
    hw = "00:00:10:87:fe:80:00:00:00:00:00:00:b8:59:9f:03:00:d4:0a:10"
    assert red.text(hw) == "00:00:10:87:fe:80:00:00:00:00:00:00:fe:ed:00:00:00:00:00:01"


def test_hostnames_fqdn_short_name_domain_and_siblings():
    red = Redactor(hostnames=["node01.cluster.example.com"])
    out = red.text(
        "node01 NODE01.cluster.example.com node02.cluster.example.com search cluster.example.com "
        "node01_ib0 xnode01 node010"
    )
    assert out == (
        "host-1 host-1.domain-1 host-2.domain-1 search domain-1 host-1_ib0 xnode01 node010"
    )
    assert red.name("hosts/node01-dmesg.txt") == "hosts/host-1-dmesg.txt"
    assert red.summary()["hostnames"] == 3  # node01, node02, cluster.example.com


def test_hostnames_that_would_hit_words_or_tokens_are_ignored():
    red = Redactor(hostnames=["localhost", "host", "domain", "x", "1234", "10.1.2.3", ""])
    assert red.text("localhost host-1 domain 1234 x") == "localhost host-1 domain 1234 x"


def test_kinds():
    line = "node01 10.1.2.3 0xb8599f0300d40a10 mac aa:bb:cc:dd:ee:ff 00:00:00:00:00:00"
    only_ips = Redactor(kinds=("ips",), hostnames=["node01"])
    assert only_ips.text(line) == line.replace("10.1.2.3", "198.18.0.1")
    assert only_ips.summary() == {"ips": 1}
    macs = Redactor(kinds=("macs",))
    assert macs.text(line) == line.replace("aa:bb:cc:dd:ee:ff", "02:ed:00:00:00:01")
    assert Redactor().text("aa:bb:cc:dd:ee:ff") == "aa:bb:cc:dd:ee:ff"  # off by default
    assert Redactor(kinds=()).text(line) == line
    with pytest.raises(ValueError, match="bogus"):
        Redactor(kinds=("ips", "bogus"))


@pytest.mark.parametrize(
    "line",
    [
        "mlx5_core 0000:0c:00.0: firmware version: 20.31.2354",
        "kernel 4.18.0-513.el8.x86_64 MLNX_OFED_LINUX-5.8-1.0.1.1 fw 16.35.2000.0",
        "rate: 200 Gb/sec (4X HDR) Rate: 400",
        "Aug 17 06:18:01 2025-01-17T15:36:26,128279+00:00 12:34:56",
        "base lid: 0x3a4 sm lid: 0x11c Capability mask: 0x00010000 0x2651e848",
        "PortXmitData:....................178791657177235",
        "kworker/13:2:4055883 blocked; RIP 0xffff8e8b12345678 VAddr 0x007f9fc479c000",
        "uuid 3f2504e0-4f89-11d3-9a0c-0305e82c3301 sha256 " + "ab" * 32,
        "127.0.0.1 0.0.0.0 255.255.255.0 255.255.255.255 :: ::1",
        # 16 decimal digits are a number: a data counter past 10^15, a time in microseconds
        "1748030377748202\n",
        '    "dump_timestamp_us": 1748030377748202,',
    ],
)
def test_look_alikes_are_kept(line):
    red = Redactor(kinds=("hostnames", "ips", "guids", "macs"))
    assert red.text(line) == line


def test_mapping_is_a_copy():
    red = Redactor()
    red.text("10.9.9.9")
    red.mapping.clear()
    assert red.mapping == {"10.9.9.9": "198.18.0.1"}


# -- properties ------------------------------------------------------------------------------

# any IPv4 but the kept ones (0/8, 127/8, 255.x: broadcast and netmasks)
ipv4s = st.tuples(st.integers(1, 254).filter(lambda o: o != 127), *[st.integers(0, 255)] * 3).map(
    lambda o: ".".join(map(str, o))
)
# GUIDs as the module defines them: OUI at least 00:00:80, not a kernel pointer, not a mask;
# written bare (16 digits, no 0x), one has a hex letter (16 decimal digits are a number)
guid_values = st.integers(2**47, 2**64 - 1).filter(
    lambda v: (v >> 48) != 0xFFFF and v & 0xFFFFFFFF != 0
)
guid_forms = st.tuples(guid_values, st.sampled_from(["0x", "colon", "gid", "bare"])).filter(
    lambda t: t[1] != "bare" or not f"{t[0]:016x}".isdigit()
)
guid_texts = guid_forms.map(
    lambda t: (
        f"0x{t[0]:016x}"
        if t[1] == "0x"
        else ":".join(f"{t[0]:016x}"[i : i + 4] for i in range(0, 16, 4))
        if t[1] == "colon"
        else "fe80:0000:0000:0000:" + ":".join(f"{t[0]:016x}"[i : i + 4] for i in range(0, 16, 4))
        if t[1] == "gid"
        else f"{t[0]:016x}"
    )
)
fillers = st.sampled_from(
    [" ", "\n", " peer ", ": ", " (", ") ", "\tnode_guid:\t", " GID: ", "=", " 0000:0c:00.0 "]
)


def _present(value: str, text: str) -> bool:
    return (
        re.search(r"(?<![0-9a-fA-F:.])" + re.escape(value) + r"(?![0-9a-fA-F:]|\.\d)", text)
        is not None
    )


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(fillers, st.one_of(ipv4s, guid_texts)), min_size=1, max_size=8))
def test_property_originals_gone_and_idempotent(pieces):
    text = "".join(filler + value for filler, value in pieces) + "\n"
    red = Redactor()
    out = red.text(text)
    for _, value in pieces:
        assert not _present(value, out), (value, out)
        assert not _present(value.upper(), out.upper()), (value, out)
    assert red.text(out) == out
    # a second file with the same values gets the very same tokens
    assert red.text(text) == out


@settings(max_examples=100, deadline=None)
@given(st.lists(ipv4s, min_size=1, max_size=5, unique=True))
def test_property_ipv4_tokens_are_ipv4_and_distinct(values):
    red = Redactor()
    tokens = [red.text(v) for v in values]
    assert len(set(tokens)) == len(values)
    for token in tokens:
        assert ipaddress.ip_address(token) in ipaddress.ip_network("198.18.0.0/15")
