"""The counter catalogue: names, categories, widths, units and the default rules with reasons.

The 22 mlx5 hw_counters and their classes come from NVIDIA's documentation of the mlx5
hw_counters (17 error counters, 5 informative ones of which ``lifespan`` is a setting);
widths come from the IBTA PortCounters attribute.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
from typing import Dict, List, Set

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.9/3.10
    import tomli as tomllib
from conftest import SCENARIOS_DIR
from snapshots import snapshot

from ibdiag.counters import catalogue as catalogue_module
from ibdiag.counters.catalogue import (
    CATALOGUE_FILE,
    Catalogue,
    CatalogueError,
    CounterInfo,
    catalogue,
    lookup,
    parse_catalogue,
    rule_for,
)
from ibdiag.counters.deltas import compare
from ibdiag.counters.grading import grade_errors, saturated
from ibdiag.thresholds import CounterRule, Thresholds

# --- the 22 documented mlx5 hw_counters (seed doc 000: "There are 22 counters per IB port") --

SEED_ERROR_COUNTERS = (
    "duplicate_request implied_nak_seq_err local_ack_timeout_err out_of_buffer out_of_sequence "
    "packet_seq_err req_cqe_error req_cqe_flush_error req_remote_access_errors "
    "req_remote_invalid_request req_rnr_retries_exceeded req_transport_retries_exceeded "
    "resp_cqe_error resp_cqe_flush_error resp_local_length_error resp_remote_access_errors "
    "rnr_nak_retry_err"
).split()
SEED_INFORMATIVE_COUNTERS = (
    "lifespan rx_atomic_requests rx_dct_connect rx_read_requests rx_write_requests"
).split()

ROCE_CONGESTION = (
    "np_cnp_sent rp_cnp_handled np_ecn_marked_roce_packets rp_cnp_ignored roce_adp_retrans "
    "roce_adp_retrans_to roce_slow_restart roce_slow_restart_cnps roce_slow_restart_trans"
).split()

CATEGORIES = {"error", "congestion", "traffic", "config"}


def test_the_seed_lists_exactly_22_hw_counters():
    names = SEED_ERROR_COUNTERS + SEED_INFORMATIVE_COUNTERS
    assert len(names) == 22
    assert len(set(names)) == 22


@pytest.mark.parametrize("name", SEED_ERROR_COUNTERS + SEED_INFORMATIVE_COUNTERS)
def test_every_documented_hw_counter_is_catalogued_under_hw_counters(name):
    info = catalogue()[name]
    assert info.name == name
    assert info.directory == "hw_counters"
    assert info.meaning.strip(), f"{name} has no meaning"


@pytest.mark.parametrize("name", SEED_ERROR_COUNTERS)
def test_documented_error_counters_are_errors(name):
    assert catalogue()[name].category == "error"


@pytest.mark.parametrize("name", ["rx_atomic_requests", "rx_dct_connect", "rx_read_requests"])
def test_documented_informative_counters_are_traffic_and_not_graded(name):
    info = catalogue()[name]
    assert info.category == "traffic"
    assert info.on_increase == "info"
    assert info.rate_warn_per_hour is None and info.rate_fail_per_hour is None


def test_rx_write_requests_is_traffic():
    assert catalogue()["rx_write_requests"].category == "traffic"


def test_lifespan_is_a_setting_in_milliseconds():
    info = catalogue()["lifespan"]
    assert info.category == "config"
    assert info.unit == "ms"
    assert info.on_increase == "info"


@pytest.mark.parametrize("name", ROCE_CONGESTION)
def test_roce_congestion_counters_are_catalogued_as_congestion(name):
    info = catalogue()[name]
    assert info.directory == "hw_counters"
    assert info.category == "congestion"
    assert info.on_increase == "info"  # reported, never graded
    assert info.rate_fail_per_hour is None and info.rate_warn_per_hour is None


def test_rx_icrc_encapsulated_and_out_of_buffer_are_present_hw_errors():
    for name in ("rx_icrc_encapsulated", "out_of_buffer"):
        assert catalogue()[name].directory == "hw_counters"
        assert catalogue()[name].category == "error"


def test_every_entry_is_well_formed():
    for name, info in catalogue().items():
        assert isinstance(info, CounterInfo)
        assert info.name == name
        assert info.directory in (
            "counters",
            "counters_ext",
            "hw_counters",
            "perfquery",
            "ethtool",
        ), name
        assert info.category in CATEGORIES, name
        assert info.unit in ("events", "packets", "words", "bytes", "ms"), name
        assert info.on_increase in ("info", "warn", "fail"), name
        assert info.meaning.strip(), name


# --- widths (IBTA PortCounters) and saturation ---------------------------------------------

WIDTHS = {
    "symbol_error": 16,
    "link_downed": 8,
    "link_error_recovery": 8,
    "port_rcv_errors": 16,
    "port_rcv_remote_physical_errors": 16,
    "port_rcv_switch_relay_errors": 16,
    "port_xmit_discards": 16,
    "port_rcv_constraint_errors": 8,
    "port_xmit_constraint_errors": 8,
    "local_link_integrity_errors": 4,
    "excessive_buffer_overrun_errors": 4,
    "VL15_dropped": 16,
    "port_xmit_wait": 32,
}
SATURATED = {4: 15, 8: 255, 16: 65535, 32: 4294967295}


@pytest.mark.parametrize("name,width", sorted(WIDTHS.items()))
def test_width_per_the_ib_spec(name, width):
    info = catalogue()[name]
    assert info.width == width
    assert info.saturated_value == SATURATED[width]


def test_saturated_values_are_the_documented_maxima():
    assert catalogue()["symbol_error"].saturated_value == 65535
    assert catalogue()["link_downed"].saturated_value == 255
    assert catalogue()["local_link_integrity_errors"].saturated_value == 15
    assert catalogue()["port_xmit_wait"].saturated_value == 4294967295


def test_counters_without_a_fixed_width_have_no_saturated_value():
    for name in ("port_rcv_data_64", "port_xmit_data_64", "rx_write_requests", "out_of_buffer"):
        assert catalogue()[name].width is None
        assert catalogue()[name].saturated_value is None
    assert lookup("not_a_counter").saturated_value is None


def test_saturated_helper_finds_only_values_at_their_maximum():
    values = {
        "symbol_error": 65535,
        "link_downed": 254,
        "local_link_integrity_errors": 15,
        "port_xmit_wait": 4294967295,
        "port_rcv_data_64": 2**64 - 1,  # no fixed width: never "saturated"
        "mystery": 65535,  # unknown: never graded
    }
    assert [info.name for info in saturated(values)] == [
        "symbol_error",
        "local_link_integrity_errors",
        "port_xmit_wait",
    ]


@pytest.mark.parametrize(
    "name", ["port_xmit_data", "port_rcv_data", "port_xmit_data_64", "port_rcv_data_64"]
)
def test_data_counters_count_four_byte_words(name):
    info = catalogue()[name]
    assert info.unit == "words"
    assert info.category == "traffic"
    assert "4-byte words" in info.meaning


def test_packet_counters_count_packets():
    for name in ("port_xmit_packets", "port_rcv_packets", "port_rcv_packets_64"):
        assert catalogue()[name].unit == "packets"


def test_port_xmit_wait_is_congestion_reported_not_graded():
    info = catalogue()["port_xmit_wait"]
    assert info.category == "congestion"
    assert info.on_increase == "info"
    assert info.rate_fail_per_hour is None


# --- default rules and their reasons (issue 3 item 4) ----------------------------------------


def _graded(info: CounterInfo) -> bool:
    return (
        info.on_increase in ("warn", "fail")
        or info.rate_warn_per_hour is not None
        or info.rate_fail_per_hour is not None
    )


def test_every_graded_counter_has_a_reason_and_an_action():
    graded = [info for info in catalogue().values() if _graded(info)]
    informative_errors = {
        "VL15_dropped",
        "req_cqe_flush_error",
        "resp_cqe_flush_error",
        "QP1Dropped",
    }
    errors = {info.name for info in catalogue().values() if info.category == "error"}
    assert {info.name for info in graded} == errors - informative_errors
    missing = [info.name for info in graded if not info.reason.strip() or not info.action.strip()]
    assert missing == []


def test_only_error_counters_are_graded():
    for info in catalogue().values():
        if info.category != "error":
            assert not _graded(info), info.name


@pytest.mark.parametrize(
    "name", ["link_downed", "local_link_integrity_errors", "excessive_buffer_overrun_errors"]
)
def test_any_increase_fails(name):
    info = catalogue()[name]
    assert info.on_increase == "fail"
    assert info.category == "error"
    assert "any increase fails" in info.reason


def test_symbol_error_warns_and_fails_above_120_per_hour_with_the_ber_reason():
    info = catalogue()["symbol_error"]
    assert info.on_increase == "warn"
    assert info.rate_fail_per_hour == 120
    assert info.rate_warn_per_hour is None
    assert "120" in info.reason and "1e-12" in info.reason and "NVSentinel" in info.reason
    assert "cable" in info.action


@pytest.mark.parametrize(
    "name",
    [
        "port_rcv_errors",
        "port_xmit_discards",
        "port_rcv_remote_physical_errors",
        "port_rcv_constraint_errors",
        "port_xmit_constraint_errors",
        "local_ack_timeout_err",
        "req_transport_retries_exceeded",
        "req_rnr_retries_exceeded",
        "rnr_nak_retry_err",
    ],
)
def test_increase_warns_and_a_high_rate_fails(name):
    info = catalogue()[name]
    assert info.on_increase == "warn"
    assert info.rate_fail_per_hour is not None and info.rate_fail_per_hour > 0
    assert f"{info.rate_fail_per_hour:g}" in info.reason  # the reason states the limit


def test_port_xmit_discards_fails_above_1000_per_hour():
    assert catalogue()["port_xmit_discards"].rate_fail_per_hour == 1000


@pytest.mark.parametrize(
    "name",
    [
        "packet_seq_err",
        "out_of_sequence",
        "implied_nak_seq_err",
        "duplicate_request",
        "out_of_buffer",
        "req_cqe_error",
        "resp_cqe_error",
        "resp_local_length_error",
        "req_remote_access_errors",
        "resp_remote_access_errors",
        "req_remote_invalid_request",
    ],
)
def test_increase_warns_without_a_rate_fail(name):
    info = catalogue()[name]
    assert info.on_increase == "warn"
    assert info.rate_fail_per_hour is None
    assert "warns" in info.reason


@pytest.mark.parametrize("name", ["req_cqe_flush_error", "resp_cqe_flush_error"])
def test_flush_errors_are_informative(name):
    info = catalogue()[name]
    assert info.on_increase == "info"
    assert info.rate_warn_per_hour is None and info.rate_fail_per_hour is None
    assert "informative" in info.reason and "teardown" in info.meaning


def test_no_default_lifetime_limit():
    for name in catalogue():
        assert rule_for(name, Thresholds()).lifetime_limit is None, name


def test_default_rule_mirrors_the_entry():
    rule = catalogue()["symbol_error"].default_rule()
    assert rule.on_increase == "warn"
    assert rule.rate_fail_per_hour == 120
    assert rule.rate_warn_per_hour is None
    assert rule.lifetime_limit is None


# --- unknown counters ------------------------------------------------------------------------


def test_unknown_counter_looks_up_as_unknown_and_ungraded():
    info = lookup("vendor_magic_errors", "hw_counters")
    assert info.name == "vendor_magic_errors"
    assert info.directory == "hw_counters"
    assert info.category == "unknown"
    assert info.width is None
    assert not _graded(info)
    assert "vendor_magic_errors" not in catalogue()
    assert lookup("another_one").directory == "counters"


def test_unknown_counter_is_never_graded_even_with_an_override():
    before = snapshot()
    after = before.model_copy(update={"collected_at": before.collected_at.replace(hour=14)})
    th = Thresholds(counters={"vendor_magic_errors": CounterRule(on_increase="fail")})
    results = grade_errors(
        "mlx5_0:1",
        {"vendor_magic_errors": 10**9},
        {"vendor_magic_errors": 0},
        compare(after, before),
        th,
        "hw_counters",
    )
    assert results == []  # not an error-category counter: shown in the snapshot, never graded


# --- rule_for: per-field overrides -----------------------------------------------------------


def test_rule_for_without_override_is_the_default():
    assert rule_for("link_downed", Thresholds()) == catalogue()["link_downed"].default_rule()


def test_the_default_rules_are_made_once_and_an_override_never_changes_them():
    # Default rules and lookups are cached (every counter of every port asks, every scrape):
    # shared, so they must stay what the catalogue says whatever an override did.
    assert rule_for("symbol_error", Thresholds()) is rule_for("symbol_error", Thresholds())
    assert lookup("rx_prio3_discards") is lookup("rx_prio3_discards")
    th = Thresholds(counters={"symbol_error": CounterRule(rate_fail_per_hour=5)})
    assert rule_for("symbol_error", th).rate_fail_per_hour == 5
    assert rule_for("symbol_error", Thresholds()).rate_fail_per_hour == 120
    with pytest.raises(ValueError):  # frozen: a caller cannot change the shared rule
        rule_for("symbol_error", Thresholds()).rate_fail_per_hour = 1  # type: ignore[misc]
    assert rule_for("symbol_error", Thresholds()) == catalogue()["symbol_error"].default_rule()


def test_rule_for_setting_only_the_rate_keeps_on_increase():
    th = Thresholds(counters={"symbol_error": CounterRule(rate_fail_per_hour=10)})
    rule = rule_for("symbol_error", th)
    assert rule.on_increase == "warn"
    assert rule.rate_fail_per_hour == 10
    assert rule.rate_warn_per_hour is None
    assert rule.lifetime_limit is None


def test_rule_for_setting_only_on_increase_keeps_the_rate():
    th = Thresholds(counters={"symbol_error": CounterRule(on_increase="fail")})
    rule = rule_for("symbol_error", th)
    assert rule.on_increase == "fail"
    assert rule.rate_fail_per_hour == 120


def test_rule_for_lifetime_limit_keeps_everything_else():
    th = Thresholds(counters={"port_xmit_discards": CounterRule(lifetime_limit=2)})
    rule = rule_for("port_xmit_discards", th)
    assert rule.lifetime_limit == 2
    assert rule.on_increase == "warn"
    assert rule.rate_fail_per_hour == 1000


def test_rule_for_explicit_none_switches_a_default_off():
    th = Thresholds(counters={"symbol_error": CounterRule(rate_fail_per_hour=None)})
    rule = rule_for("symbol_error", th)
    assert rule.rate_fail_per_hour is None
    assert rule.on_increase == "warn"


def test_rule_for_an_override_of_another_counter_changes_nothing():
    th = Thresholds(counters={"link_downed": CounterRule(on_increase="info")})
    assert rule_for("symbol_error", th) == catalogue()["symbol_error"].default_rule()
    assert rule_for("link_downed", th).on_increase == "info"


# --- every counter in every captured tree ------------------------------------------------------


def _scenario_counter_files() -> Dict[str, Set[str]]:
    """{directory kind: counter names} over every scenario's sysfs capture."""
    found: Dict[str, Set[str]] = {}
    patterns = (
        "*/root/sys/class/infiniband/*/ports/*/*counters*/*",
        "*/root/sys/class/infiniband/*/*counters*/*",
    )
    for pattern in patterns:
        for path in glob.glob(os.path.join(SCENARIOS_DIR, pattern)):
            directory = os.path.basename(os.path.dirname(path))
            found.setdefault(directory, set()).add(os.path.basename(path))
    return found


def test_every_port_counter_in_the_captures_is_catalogued():
    found = _scenario_counter_files()
    assert {"counters", "counters_ext"} <= set(found)  # the mlx4 captures have both
    port_counters = found["counters"] | found["counters_ext"]
    assert len(port_counters) >= 25
    missing = sorted(name for name in port_counters if name not in catalogue())
    assert missing == []
    for name in port_counters:
        assert lookup(name).category in CATEGORIES


def test_capture_counter_directories_match_the_catalogue():
    found = _scenario_counter_files()
    for name in found["counters_ext"]:
        assert catalogue()[name].directory == "counters_ext", name
    for name in found["counters"]:
        assert catalogue()[name].directory == "counters", name


def test_mlx4_diag_counters_look_up_as_unknown():
    """mlx4 device-level diag_counters (num_cqovf, sq_num_lle, ...) are not catalogued."""
    unknown: List[str] = sorted(_scenario_counter_files().get("diag_counters", set()))
    assert "num_cqovf" in unknown and "sq_num_lle" in unknown
    for name in unknown:
        info = lookup(name, "diag_counters")
        assert info.category == "unknown"
        assert not _graded(info)


# --- the catalogue is data: ibdiag/counters/catalogue.toml, validated as it is read ----------

GOOD_ENTRY = "category = 'error'\nmeaning = 'Something went wrong.'\n"


def _parse(text: str) -> Catalogue:
    return parse_catalogue("[actions]\nphysical = 'reseat the cable'\n" + text, "test.toml")


def test_the_shipped_file_is_the_catalogue():
    with open(CATALOGUE_FILE, encoding="utf-8") as handle:
        parsed = parse_catalogue(handle.read(), CATALOGUE_FILE)
    assert dict(parsed.counters) == dict(catalogue())
    assert len(parsed.counters) >= 80
    assert {info.name for _, info in parsed.families} == {
        "rx_prioN_pause",
        "tx_prioN_pause",
        "rx_prioN_discards",
        "PortXmitDataSLN",
    }
    assert parsed.by_alias["SymbolErrorCounter"] is parsed.counters["symbol_error"]


def test_an_entry_reads_into_every_field_with_the_defaults_filled_in():
    parsed = _parse(
        "[hw_counters.a]\n" + GOOD_ENTRY + "[counters.b]\n" + GOOD_ENTRY + "width = 8\n"
        "unit = 'packets'\non_increase = 'fail'\nrate_warn_per_hour = 1.5\n"
        "rate_fail_per_hour = 10\nreason = 'why'\naction = 'physical'\naliases = ['B']\n"
    )
    assert list(parsed.counters) == ["a", "b"]  # the file's order
    assert parsed.counters["a"] == CounterInfo("a", "hw_counters", "error", "Something went wrong.")
    assert parsed.counters["b"] == CounterInfo(
        "b", "counters", "error", "Something went wrong.", 8, "packets", "fail", 1.5, 10, "why",
        "reseat the cable", ("B",),
    )  # fmt: skip
    assert parsed.by_alias == {"B": parsed.counters["b"]}


@pytest.mark.parametrize(
    "text,message",
    [
        ("[counters.x]\n" + GOOD_ENTRY + "widht = 16\n", "[counters.x]: unknown key 'widht'"),
        ("[counters.x]\ncategory = 'error'\n", "[counters.x]: missing meaning"),
        ("[counters.x]\nmeaning = 'm'\n", "[counters.x]: missing category"),
        ("[counters.x]\n" + GOOD_ENTRY + "width = '16'\n", "[counters.x]: width must be int"),
        ("[counters.x]\n" + GOOD_ENTRY + "width = true\n", "[counters.x]: width must be int"),
        ("[counters.x]\n" + GOOD_ENTRY + "width = 0\n", "[counters.x]: width must be 1 to 64"),
        ("[counters.x]\n" + GOOD_ENTRY + "width = 65\n", "[counters.x]: width must be 1 to 64"),
        ("[counters.x]\ncategory = 'error'\nmeaning = 3\n", "[counters.x]: meaning must be str"),
        (
            "[counters.x]\n" + GOOD_ENTRY + "rate_fail_per_hour = '120'\n",
            "[counters.x]: rate_fail_per_hour must be int or float",
        ),
        (
            "[counters.x]\n" + GOOD_ENTRY + "rate_warn_per_hour = -1\n",
            "[counters.x]: rate_warn_per_hour must be a number of at least 0",
        ),
        (
            "[counters.x]\n" + GOOD_ENTRY + "rate_warn_per_hour = nan\n",
            "[counters.x]: rate_warn_per_hour must be a number of at least 0",
        ),
        (
            "[counters.x]\ncategory = 'errors'\nmeaning = 'm'\n",
            "[counters.x]: category 'errors' is not one of error, congestion, traffic, config",
        ),
        ("[counters.x]\n" + GOOD_ENTRY + "unit = 'bits'\n", "[counters.x]: unit 'bits' is not"),
        (
            "[counters.x]\n" + GOOD_ENTRY + "on_increase = 'drain'\n",
            "[counters.x]: on_increase 'drain' is not one of info, warn, fail",
        ),
        (
            "[counters.x]\n" + GOOD_ENTRY + "action = 'reboot'\n",
            "[counters.x]: action 'reboot' is not in [actions] (physical)",
        ),
        ("[counters.x]\n" + GOOD_ENTRY + "aliases = 'X'\n", "[counters.x]: aliases must be list"),
        ("[counters.x]\n" + GOOD_ENTRY + "aliases = [1]\n", "[counters.x]: aliases must be str"),
        ("[countres.x]\n" + GOOD_ENTRY, "[countres]: not a counter directory"),
        ("[counters]\nx = 1\n", "[counters.x]: a table of fields is expected"),
        ("[actions]\nfabric = 1\n", "not valid TOML"),  # [actions] twice
        ("[counters.x]\n" + GOOD_ENTRY + "[counters.x]\n" + GOOD_ENTRY, "not valid TOML"),
        (
            "[counters.x]\n" + GOOD_ENTRY + "[hw_counters.x]\n" + GOOD_ENTRY,
            "[hw_counters.x]: 'x' is already defined by [counters.x]",
        ),
        (
            "[counters.x]\n" + GOOD_ENTRY + "[perfquery.y]\n" + GOOD_ENTRY + "aliases = ['x']\n",
            "[perfquery.y]: 'x' is already defined by [counters.x]",
        ),
        (
            "[counters.x]\n"
            + GOOD_ENTRY
            + "aliases = ['X']\n[counters.y]\n"
            + GOOD_ENTRY
            + "aliases = ['X']\n",
            "[counters.y]: 'X' is already defined by [counters.x]",
        ),
        (
            "[ethtool.x]\n" + GOOD_ENTRY + "[ethtool.x_famN]\n" + GOOD_ENTRY + "[ethtool.x]\n",
            "not valid TOML",
        ),
    ],
)
def test_a_malformed_catalogue_is_refused_naming_the_entry(text, message):
    with pytest.raises(CatalogueError) as caught:
        _parse(text)
    assert str(caught.value).startswith("test.toml: ")
    assert message in str(caught.value)


def test_duplicate_names_in_one_directory_name_the_entry():
    with pytest.raises(CatalogueError, match=r"Cannot declare \('counters', 'x'\) twice"):
        _parse("[counters.x]\n" + GOOD_ENTRY + "[counters.x]\n" + GOOD_ENTRY)


def test_a_family_pattern_that_does_not_compile_names_the_entry_when_first_used():
    parsed = _parse("[ethtool.x]\n" + GOOD_ENTRY + "pattern = 'x('\n")
    assert parsed.counters == {}  # a family is not a counter name
    with pytest.raises(CatalogueError, match=r"test.toml: \[ethtool.x\]: pattern 'x\(': missing"):
        parsed.family("x1")


def test_a_family_name_may_not_shadow_a_counter():
    with pytest.raises(CatalogueError, match=r"\[ethtool.x\]: 'x' is already defined"):
        _parse("[counters.x]\n" + GOOD_ENTRY + "[ethtool.x]\npattern = 'x\\d+'\n" + GOOD_ENTRY)


@pytest.fixture
def damaged_catalogue(tmp_path, monkeypatch):
    """The shipped catalogue with one misspelt key, read afresh; the real one again afterwards."""
    damaged = tmp_path / "catalogue.toml"
    with open(CATALOGUE_FILE, encoding="utf-8") as handle:
        text = handle.read()
    damaged.write_text(text.replace("width = 16", "widht = 16", 1), encoding="utf-8")
    as_json = tmp_path / "catalogue.json"  # what the loader reads: the TOML's tables as JSON
    as_json.write_text(json.dumps(tomllib.loads(damaged.read_text())), encoding="utf-8")
    monkeypatch.setattr(catalogue_module, "CATALOGUE_FILE", str(damaged))
    monkeypatch.setattr(catalogue_module, "CATALOGUE_JSON", str(as_json))
    caches = (catalogue_module._loaded, catalogue_module.lookup, catalogue_module._default_rule)
    for cache in caches:
        cache.cache_clear()
    yield str(damaged)
    monkeypatch.undo()
    for cache in caches:
        cache.cache_clear()


def test_a_damaged_install_is_one_line_and_exit_3(damaged_catalogue, run_cli):
    with pytest.raises(CatalogueError, match=r"\[counters.symbol_error\]: unknown key 'widht'"):
        lookup("symbol_error")
    result = run_cli("explain", "symbol_error")
    assert result.exit_code == 3
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1
    assert f"{damaged_catalogue}: [counters.symbol_error]: unknown key 'widht'" in result.stderr


def test_the_json_the_loader_reads_is_the_toml_people_edit():
    """catalogue.json is generated from catalogue.toml (``python -m ibdiag.counters.catalogue``):
    the two hold the same tables, so editing the TOML without regenerating fails here."""
    with open(CATALOGUE_FILE, encoding="utf-8") as handle:
        tables = tomllib.loads(handle.read())
    with open(catalogue_module.CATALOGUE_JSON, encoding="utf-8") as handle:
        shipped = json.load(handle)
    assert shipped == tables, "catalogue.json is stale: run python -m ibdiag.counters.catalogue"


def test_the_catalogue_is_read_on_first_use_and_once():
    """The file is parsed lazily (importing the CLI, config or the catalogue reads nothing) and
    once per process however many lookups follow (a prolog looks up every counter of 64 HCAs);
    the families' patterns are compiled only when a name misses the table."""
    code = (
        "import ibdiag.cli, ibdiag.config\n"
        "from ibdiag.counters import catalogue as c\n"
        "assert c._loaded.cache_info().misses == 0, 'read at import'\n"
        "for name in list(c.catalogue()) + ['SymbolErrorCounter']:\n"
        "    c.lookup(name, 'hw_counters')\n"
        "assert c._loaded()._compiled is None, 'family patterns compiled without a miss'\n"
        "assert c.lookup('rx_prio1_pause').name == 'rx_prioN_pause'\n"
        "assert c.lookup('nope').category == 'unknown'\n"
        "assert c.catalogue() is c.catalogue()\n"
        "assert c._loaded.cache_info().misses == 1\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr


def test_an_action_must_be_text():
    with pytest.raises(CatalogueError, match=r"test.toml: \[actions\]: every action must be a"):
        parse_catalogue("[actions]\nphysical = 1\n", "test.toml")
