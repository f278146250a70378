"""Profiles, site config and flags -> effective Thresholds; every bad config is one clear line."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from typing import Dict, Optional

import pytest

from ibdiag import config
from ibdiag.config import ConfigError, load_effective, profile_names, render_show
from ibdiag.counters.catalogue import rule_for
from ibdiag.thresholds import Thresholds

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.9/3.10
    import tomli as tomllib

SHIPPED = [
    "azure-hbv3",
    "azure-hbv4",
    "azure-ndv4",
    "azure-ndv5",
    "crusoe-h100",
    "dgx-h100",
    "generic",
]
NDV5_NAMES = [f"mlx5_ib{i}" for i in range(8)]


def profile_source(name: str) -> str:
    return f"profile {name} ({os.path.join(config.PROFILES_DIR, name + '.toml')})"


def write(tmp_path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return str(path)


def load(profile: Optional[str] = None, config_path: Optional[str] = None, **cli: object):
    return load_effective(profile, config_path, cli)


def error_of(profile: Optional[str] = None, config_path: Optional[str] = None, **cli) -> str:
    with pytest.raises(ConfigError) as info:
        load(profile, config_path, **cli)
    message = str(info.value)
    assert "\n" not in message, message
    return message


# --- shipped profiles ---------------------------------------------------------------------


def test_profile_names_lists_every_shipped_profile():
    assert profile_names() == SHIPPED


@pytest.mark.parametrize("name", SHIPPED)
def test_every_profile_loads_and_validates(name):
    path = os.path.join(config.PROFILES_DIR, f"{name}.toml")
    with open(path, "rb") as handle:
        data = tomllib.load(handle)
    assert isinstance(data.pop("description"), str)
    assert set(data) <= set(Thresholds.model_fields)
    assert "counters" not in data, "profiles set no counter thresholds of their own"
    Thresholds.model_validate(data, strict=True)
    with open(path, encoding="utf-8") as handle:
        assert "Source" in handle.read() or name == "generic", "say where the numbers come from"

    effective = load(name)
    assert effective.profile == name
    assert set(effective.sources) == set(data)
    assert all(source == profile_source(name) for source in effective.sources.values())


def test_azure_ndv5_expects_8_ndr_hcas_named_mlx5_ib0_to_7_and_ignores_mlx5_an():
    th = load("azure-ndv5").thresholds
    assert th.expect_hcas == 8
    assert th.expect_hca_names == NDV5_NAMES
    assert th.expect_rate_gbps == 400
    assert th.ignores("mlx5_an0") and not th.ignores("mlx5_ib0")
    assert th.ignore_ethernet is False and th.counters == {}


@pytest.mark.parametrize(
    ("name", "count", "rate", "names"),
    [
        ("azure-ndv4", 8, 200, NDV5_NAMES),
        ("azure-hbv4", 1, 400, ["mlx5_ib0"]),
        ("azure-hbv3", 1, 200, ["mlx5_ib0"]),
    ],
)
def test_other_azure_profiles(name, count, rate, names):
    th = load(name).thresholds
    assert (th.expect_hcas, th.expect_rate_gbps, th.expect_hca_names) == (count, rate, names)
    assert th.ignore_hcas == ["mlx5_an*"]


def test_dgx_h100_leaves_the_ethernet_storage_nics_out_and_names_nothing():
    th = load("dgx-h100").thresholds
    assert th.ignore_ethernet is True
    assert (th.expect_hcas, th.expect_rate_gbps) == (8, 400)
    assert th.expect_hca_names == [] and th.ignore_hcas == []
    assert th.expect_iommu == "passthrough"  # GPUDirect RDMA under the PCIe switches


def test_crusoe_h100_expects_8_ndr_virtual_functions_and_says_pf_tools_are_unavailable():
    th = load("crusoe-h100").thresholds
    assert (th.expect_hcas, th.expect_rate_gbps) == (8, 400)
    assert th.expect_hca_names == [] and th.ignore_hcas == [] and not th.ignore_ethernet
    with open(os.path.join(config.PROFILES_DIR, "crusoe-h100.toml"), encoding="utf-8") as handle:
        text = handle.read()
    assert "perfquery" in text and "mlxlink" in text and "physical function" in text


def test_generic_is_the_default_and_expects_nothing():
    effective = load()
    assert effective.profile == "generic"
    assert effective.thresholds == Thresholds()
    assert effective.sources == {}


# --- layers and provenance ----------------------------------------------------------------


def test_precedence_profile_then_config_then_command_line(tmp_path):
    site = write(
        tmp_path,
        "site.toml",
        """
        expect_rate_gbps = 200
        ignore_hcas = ["mlx5_an*", "mlx5_bond*"]
        """,
    )
    effective = load("azure-ndv5", site, expect_rate_gbps=100.0, expect_hcas=None)
    th = effective.thresholds
    assert th.expect_hcas == 8  # profile (the flag was None: not given)
    assert th.ignore_hcas == ["mlx5_an*", "mlx5_bond*"]  # config over profile
    assert th.expect_rate_gbps == 100.0  # command line over both
    assert effective.sources == {
        "expect_hcas": profile_source("azure-ndv5"),
        "expect_hca_names": profile_source("azure-ndv5"),
        "expect_rate_gbps": "command line",
        "ignore_hcas": f"config {site}",
        "perftest_gdr": profile_source("azure-ndv5"),
        "perftest_floor_gbps": profile_source("azure-ndv5"),
        "perftest_gdr_floor_gbps": profile_source("azure-ndv5"),
    }


def test_command_line_empty_multiple_option_and_none_change_nothing():
    effective = load("azure-ndv5", ignore_hcas=(), expect_hca_names=[], expect_rate_gbps=None)
    assert effective.thresholds.ignore_hcas == ["mlx5_an*"]
    assert effective.thresholds.expect_hca_names == NDV5_NAMES
    assert effective.sources["ignore_hcas"] == profile_source("azure-ndv5")


def test_command_line_tuple_from_click_replaces_the_list():
    effective = load("azure-ndv5", ignore_hcas=("mlx5_an*", "mlx5_eth*"))
    assert effective.thresholds.ignore_hcas == ["mlx5_an*", "mlx5_eth*"]
    assert effective.sources["ignore_hcas"] == "command line"


def test_config_can_clear_a_profile_list(tmp_path):
    site = write(tmp_path, "site.toml", "expect_hca_names = []\n")
    effective = load("azure-ndv5", site)
    assert effective.thresholds.expect_hca_names == []
    assert effective.sources["expect_hca_names"] == f"config {site}"


def test_config_selects_a_shipped_profile_by_name(tmp_path):
    site = write(tmp_path, "site.toml", 'profile = "dgx-h100"\nexpect_rate_gbps = 200\n')
    effective = load(None, site)
    assert effective.profile == "dgx-h100"
    assert effective.thresholds.ignore_ethernet is True
    assert effective.thresholds.expect_rate_gbps == 200
    assert effective.sources["ignore_ethernet"] == profile_source("dgx-h100")
    assert effective.sources["expect_rate_gbps"] == f"config {site}"


def test_config_selects_a_profile_by_path_relative_to_the_config(tmp_path):
    (tmp_path / "etc").mkdir()
    mine = write(tmp_path, "etc/cluster.toml", 'description = "our nodes"\nexpect_hcas = 4\n')
    site = write(tmp_path, "etc/site.toml", 'profile = "cluster.toml"\n')
    effective = load(None, site)
    assert effective.profile == mine
    assert effective.thresholds.expect_hcas == 4
    assert effective.sources == {"expect_hcas": f"profile {mine}"}


def test_config_selects_a_profile_by_absolute_path(tmp_path):
    mine = write(tmp_path, "cluster.toml", "expect_hcas = 2\n")
    site = write(tmp_path, "site.toml", f'profile = "{mine}"\n')
    assert load(None, site).thresholds.expect_hcas == 2


def test_profile_argument_overrides_the_configs_profile(tmp_path):
    site = write(tmp_path, "site.toml", 'profile = "azure-ndv5"\n')
    effective = load("azure-hbv3", site)
    assert effective.profile == "azure-hbv3"
    assert effective.thresholds.expect_rate_gbps == 200
    assert effective.thresholds.expect_hca_names == ["mlx5_ib0"]


def test_profile_argument_as_a_path(tmp_path):
    mine = write(tmp_path, "mine.toml", "expect_rate_gbps = 100\n")
    effective = load(mine)
    assert effective.profile == mine
    assert effective.sources == {"expect_rate_gbps": f"profile {mine}"}


def test_counter_tables_merge_per_counter_and_per_field(tmp_path):
    mine = write(
        tmp_path,
        "mine.toml",
        """
        [counters.symbol_error]
        on_increase = "fail"
        rate_fail_per_hour = 50

        [counters.link_downed]
        lifetime_limit = 3
        """,
    )
    site = write(
        tmp_path,
        "site.toml",
        """
        [counters.symbol_error]
        rate_fail_per_hour = 500

        [counters.port_rcv_errors]
        on_increase = "info"
        """,
    )
    effective = load(mine, site, counters={"link_downed": {"lifetime_limit": 7}})
    th = effective.thresholds
    symbol = th.counters["symbol_error"]
    assert (symbol.on_increase, symbol.rate_fail_per_hour) == ("fail", 500)
    assert symbol.model_fields_set == {"on_increase", "rate_fail_per_hour"}
    assert th.counters["link_downed"].lifetime_limit == 7
    assert th.counters["port_rcv_errors"].on_increase == "info"
    assert effective.sources == {
        "counters.symbol_error.on_increase": f"profile {mine}",
        "counters.symbol_error.rate_fail_per_hour": f"config {site}",
        "counters.link_downed.lifetime_limit": "command line",
        "counters.port_rcv_errors.on_increase": f"config {site}",
    }
    # fields nobody set keep the catalogue's default for that counter
    assert rule_for("port_rcv_errors", th).rate_fail_per_hour == 120
    assert rule_for("link_downed", th).on_increase == "fail"


def test_default_config_is_read_only_when_present(tmp_path, monkeypatch):
    default = tmp_path / "etc" / "ibdiag.toml"
    monkeypatch.setenv("IBDIAG_CONFIG_DIR", str(default.parent))
    assert load().sources == {}
    default.parent.mkdir()
    default.write_text('profile = "azure-hbv4"\nexpect_hcas = 2\n', encoding="utf-8")
    effective = load()
    assert effective.profile == "azure-hbv4"
    assert effective.thresholds.expect_hcas == 2
    assert effective.sources["expect_hcas"] == f"config {default}"


def test_explicit_config_replaces_the_default_one(tmp_path, monkeypatch):
    write(tmp_path, "ibdiag.toml", "expect_hcas = 2\n")
    monkeypatch.setenv("IBDIAG_CONFIG_DIR", str(tmp_path))
    assert load().sources == {"expect_hcas": f"config {tmp_path / 'ibdiag.toml'}"}
    site = write(tmp_path, "site.toml", "expect_rate_gbps = 100\n")
    assert load(None, site).sources == {"expect_rate_gbps": f"config {site}"}


def test_a_utf8_byte_order_mark_is_accepted(tmp_path):
    path = tmp_path / "site.toml"
    path.write_bytes(b"\xef\xbb\xbfexpect_hcas = 3\n")
    assert load(None, str(path)).thresholds.expect_hcas == 3


# --- every bad-config path: one line, naming the file, the key and what was expected -------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("expect_rates = 400\n", "unknown key 'expect_rates' (did you mean 'expect_rate_gbps'?)"),
        (
            'nccl_max_bytes = "lots"\n',
            "nccl_max_bytes: expected a byte count like 8, 1M or 8G (nccl-tests' K/M/G "
            'suffixes), got "lots"',
        ),
        (
            'nccl_min_bytes = "8X"\n',
            "nccl_min_bytes: expected a byte count like 8, 1M or 8G (nccl-tests' K/M/G "
            'suffixes), got "8X"',
        ),
        ("nccl_min_bytes = 8\n", "nccl_min_bytes: expected a string, got 8"),
        (
            'nccl_tests = "-rf"\n',
            "nccl_tests: expected a program path (letters, digits and _ . / + -, at most 4096, "
            'not starting with -), got "-rf"',
        ),
        (
            'nccl_tests = "all reduce"\n',
            "nccl_tests: expected a program path (letters, digits and _ . / + -, at most 4096, "
            'not starting with -), got "all reduce"',
        ),
        (
            'nccl_tests = "a;b"\n',
            "nccl_tests: expected a program path (letters, digits and _ . "
            '/ + -, at most 4096, not starting with -), got "a;b"',
        ),
        (
            'nccl_launcher_args = "-H a"\n',
            'nccl_launcher_args: expected a list of strings, got "-H a"',
        ),
        (
            'nccl_launcher_args = ["-H", ""]\n',
            'nccl_launcher_args[1]: expected a non-empty string, got ""',
        ),
        (
            'nccl_launcher_args = ["a\\u0000b"]\n',
            'nccl_launcher_args[0]: expected an argument without a NUL character, got "a\\u0000b"',
        ),
        ("nccl_launcher_args = [1]\n", "nccl_launcher_args[0]: expected a string, got 1"),
        ("nccl_gpus = 0\n", "nccl_gpus: expected a whole number of 1 or more, got 0"),
        ("nccl_gpus = true\n", "nccl_gpus: expected a whole number, got true"),
        ("perftest_size = 1\n", "perftest_size: expected a whole number of 2 or more, got 1"),
        (
            "perftest_duration_s = 0\n",
            "perftest_duration_s: expected a whole number of 1 or more, got 0",
        ),
        ("perftest_qps = 65\n", "perftest_qps: expected a whole number of at most 64, got 65"),
        (
            "perftest_base_port = 70000\n",
            "perftest_base_port: expected a whole number of at most 65000, got 70000",
        ),
        (
            'nccl_launcher = "pdsh"\n',
            "nccl_launcher: expected one of 'plain', 'mpirun' or 'srun', got \"pdsh\"",
        ),
        (
            "perftest_min_fraction = 1.5\n",
            "perftest_min_fraction: expected a number of at most 1, got 1.5",
        ),
        (
            "zzz = 1\n",
            "unknown key 'zzz'; known: aer_correctable_per_hour, ber_fail, ber_warn, counters, "
            "drop_fail_s, expect_hca_names, expect_hcas, expect_ib_mtu, expect_iommu, "
            "expect_ipoib_mtu, expect_issm, expect_pkeys, expect_rate_gbps, expect_roce_mtu, "
            "fec_outlier_factor, fec_outlier_floor, flap_fail_count, "
            "flap_min_down_s, flap_window_s, ignore_ethernet, ignore_hcas, "
            "nccl_busbw_floor_gbytes, nccl_gpus, nccl_inspector_dir, nccl_inspector_floor_gbytes, "
            "nccl_inspector_max_age_s, nccl_launcher, nccl_launcher_args, nccl_max_bytes, "
            "nccl_min_bytes, nccl_min_fraction, nccl_tests, nccl_timeout_s, perftest_base_port, "
            "perftest_duration_s, perftest_floor_gbps, perftest_gdr, perftest_gdr_floor_gbps, "
            "perftest_min_fraction, perftest_pairing, perftest_qps, perftest_size, "
            "straggler_fraction, subnets_per_rail, temperature_margin_c",
        ),
        (
            'description = "x"\n',
            "unknown key 'description': only a profile has a description",
        ),
        (
            "[counters.symbol_error]\nrate_fail = 5\n",
            "counters.symbol_error: unknown key 'rate_fail' (did you mean 'rate_fail_per_hour'?)",
        ),
        ('expect_rate_gbps = "400"\n', 'expect_rate_gbps: expected a number, got "400"'),
        ("expect_rate_gbps = -5\n", "expect_rate_gbps: expected a number greater than 0, got -5"),
        ("expect_rate_gbps = 0\n", "expect_rate_gbps: expected a number greater than 0, got 0"),
        ("expect_rate_gbps = inf\n", "expect_rate_gbps: expected a finite number, got inf"),
        ("expect_hcas = -1\n", "expect_hcas: expected a whole number of 0 or more, got -1"),
        ("expect_hcas = 8.5\n", "expect_hcas: expected a whole number, got 8.5"),
        ("expect_hcas = true\n", "expect_hcas: expected a whole number, got true"),
        ('expect_hcas = "8"\n', 'expect_hcas: expected a whole number, got "8"'),
        ('ignore_ethernet = "yes"\n', 'ignore_ethernet: expected true or false, got "yes"'),
        ('ignore_hcas = "mlx5_an*"\n', 'ignore_hcas: expected a list of strings, got "mlx5_an*"'),
        ('ignore_hcas = ["ok", 1]\n', "ignore_hcas[1]: expected a string, got 1"),
        ('ignore_hcas = [""]\n', 'ignore_hcas[0]: expected a non-empty pattern, got ""'),
        (
            'expect_hca_names = ["mlx5_ib0", " "]\n',
            'expect_hca_names[1]: expected a non-empty HCA name, got " "',
        ),
        ("counters = 5\n", "counters: expected a table, got 5"),
        ("[counters]\nsymbol_error = 5\n", "counters.symbol_error: expected a table, got 5"),
        (
            "[counters.symbl_error]\nrate_fail_per_hour = 5\n",
            "counters.symbl_error: unknown counter (not in the catalogue) "
            "(did you mean 'symbol_error'?)",
        ),
        (
            "[counters.frobnications]\non_increase = 'warn'\n",
            "counters.frobnications: unknown counter (not in the catalogue)",
        ),
        (
            "[counters.symbol_error]\nrate_fail_per_hour = -1\n",
            "counters.symbol_error.rate_fail_per_hour: expected a number of 0 or more, got -1",
        ),
        (
            "[counters.symbol_error]\nrate_warn_per_hour = nan\n",
            "counters.symbol_error.rate_warn_per_hour: expected a finite number, got nan",
        ),
        (
            "[counters.link_downed]\nlifetime_limit = -3\n",
            "counters.link_downed.lifetime_limit: expected a whole number of 0 or more, got -3",
        ),
        (
            "[counters.link_downed]\nlifetime_limit = 1.5\n",
            "counters.link_downed.lifetime_limit: expected a whole number, got 1.5",
        ),
        (
            "[counters.symbol_error]\non_increase = 'error'\n",
            "counters.symbol_error.on_increase: expected one of 'fail', 'warn' or 'info', "
            'got "error"',
        ),
        (
            "expect_hcas = -1\nexpect_rate_gbps = 0\n",
            "expect_hcas: expected a whole number of 0 or more, got -1 (and 1 more)",
        ),
        ("profile = 5\n", "profile: expected a profile name or a path to a TOML file, got 5"),
        ('profile = ""\n', 'profile: expected a profile name or a path to a TOML file, got ""'),
        (
            'expect_pkeys = ["8001"]\n',
            "expect_pkeys[0]: expected a partition key like 0x8001 (0x and at most four hex "
            'digits), got "8001"',
        ),
        (
            "expect_ib_mtu = 4000\n",
            "expect_ib_mtu: expected one of 256, 512, 1024, 2048 or 4096, got 4000",
        ),
        (
            'expect_iommu = "pt"\n',
            "expect_iommu: expected one of 'passthrough' or 'translated', got \"pt\"",
        ),
    ],
)
def test_bad_config_value(tmp_path, text, expected):
    site = write(tmp_path, "site.toml", text)
    assert error_of(None, site) == f"{site}: {expected}"


def test_config_naming_an_unknown_profile(tmp_path):
    site = write(tmp_path, "site.toml", 'profile = "nope"\n')
    assert error_of(None, site) == (
        f"{site}: profile: 'nope': no such profile; known: {', '.join(SHIPPED)} "
        "(or give a path to a TOML file)"
    )


def test_config_naming_a_missing_profile_file(tmp_path):
    site = write(tmp_path, "site.toml", 'profile = "cluster.toml"\n')
    assert error_of(None, site) == (
        f"{site}: profile: 'cluster.toml': no such file (looked for {tmp_path / 'cluster.toml'})"
    )


def test_unknown_profile_name():
    assert error_of("nope") == (
        f"profile 'nope': no such profile; known: {', '.join(SHIPPED)} "
        "(or give a path to a TOML file)"
    )


def test_missing_profile_file(tmp_path):
    missing = str(tmp_path / "gone.toml")
    assert error_of(missing) == f"profile {missing!r}: no such file"


def test_profile_file_with_a_profile_key_names_the_profile_file(tmp_path):
    mine = write(tmp_path, "mine.toml", 'profile = "azure-ndv5"\n')
    site = write(tmp_path, "site.toml", "expect_hcas = 1\n")
    assert error_of(mine, site) == (
        f"{mine}: unknown key 'profile': a profile cannot choose another profile "
        "(set profile in the site config, or use --profile)"
    )


def test_bad_value_in_a_profile_file_names_the_profile_file(tmp_path):
    mine = write(tmp_path, "mine.toml", "expect_rate_gbps = -400\n")
    site = write(tmp_path, "site.toml", "expect_hcas = 1\n")
    assert error_of(mine, site) == (
        f"{mine}: expect_rate_gbps: expected a number greater than 0, got -400"
    )


def test_profile_description_must_be_a_string(tmp_path):
    mine = write(tmp_path, "mine.toml", "description = 3\n")
    assert error_of(mine) == f"{mine}: description: expected a string, got 3"


def test_missing_explicit_config(tmp_path):
    missing = str(tmp_path / "nope.toml")
    assert error_of(None, missing) == f"{missing}: no such file"


def test_config_that_is_a_directory(tmp_path):
    assert error_of(None, str(tmp_path)) == f"{tmp_path}: is a directory, expected a TOML file"


def test_default_config_that_is_a_directory_is_an_error_not_ignored(tmp_path, monkeypatch):
    (tmp_path / "ibdiag.toml").mkdir()
    monkeypatch.setenv("IBDIAG_CONFIG_DIR", str(tmp_path))
    default = tmp_path / "ibdiag.toml"
    assert error_of() == f"{default}: is a directory, expected a TOML file"


def test_config_that_is_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = str(tmp_path / "site.toml")
    os.mkfifo(fifo)
    assert error_of(None, fifo) == f"{fifo}: not a regular file, expected a TOML file"


def test_unreadable_config(tmp_path, monkeypatch):
    site = write(tmp_path, "site.toml", "expect_hcas = 1\n")
    os.chmod(site, 0)  # enough as a normal user; root reads anyway, so also refuse the open

    def refuse(path, *args, **kwargs):
        raise PermissionError(13, "Permission denied", path)

    monkeypatch.setattr(config, "open", refuse, raising=False)
    assert error_of(None, site) == f"{site}: cannot read: permission denied"


def test_huge_config_is_refused(tmp_path):
    site = tmp_path / "site.toml"
    site.write_bytes(b"#" * (config.MAX_FILE_BYTES + 1))
    assert error_of(None, str(site)) == (
        f"{site}: {config.MAX_FILE_BYTES + 1} bytes, expected a TOML file of at most "
        f"{config.MAX_FILE_BYTES}"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "expect_hcas = 8\nexpect_rate_gbps = \n",
            "line 2, column 20: invalid TOML: invalid value",
        ),
        (
            "expect_hcas = 1\nexpect_hcas = 2\n",
            "line 2, column 16: invalid TOML: cannot overwrite a value",
        ),
        (
            "[counters.symbol_error\n",
            "line 1, column 23: invalid TOML: expected ']' at the end of a table declaration",
        ),
        ("ignore_hcas = [\n", "end of file: invalid TOML: invalid value"),
    ],
)
def test_invalid_toml_gives_line_and_column(tmp_path, text, expected):
    site = write(tmp_path, "site.toml", text)
    assert error_of(None, site) == f"{site}: {expected}"


def test_deeply_nested_toml_is_an_error_not_a_crash(tmp_path):
    site = write(tmp_path, "site.toml", "ignore_hcas = " + "[" * 1000 + "]" * 1000 + "\n")
    # tomllib/tomli raise RecursionError here (newer parsers may say so in a TOMLDecodeError)
    assert error_of(None, site).startswith(f"{site}: invalid TOML: ")


def test_non_utf8_config(tmp_path):
    site = tmp_path / "site.toml"
    site.write_bytes(b'expect_hcas = 8\nignore_hcas = ["\xff"]\n')
    assert error_of(None, str(site)) == (
        f"{site}: line 2, column 17: not UTF-8 text (byte 0xff); save the file as UTF-8"
    )


def test_unknown_command_line_key():
    assert error_of(expect_rates=400) == "command line: unknown key 'expect_rates'"


def test_bad_command_line_value():
    assert error_of(expect_rate_gbps=-5.0) == (
        "command line: expect_rate_gbps: expected a number greater than 0, got -5.0"
    )


# --- settings valid alone but impossible together ----------------------------------------


def test_expected_count_below_the_named_hcas_blames_the_later_layer(tmp_path):
    site = write(tmp_path, "site.toml", "expect_hcas = 4\n")
    assert error_of("azure-ndv5", site) == (
        f"{site}: expect_hcas: expected at least 8 (the HCAs named in expect_hca_names, from "
        f"{profile_source('azure-ndv5')}), got 4"
    )


def test_more_names_than_the_expected_count(tmp_path):
    site = write(tmp_path, "site.toml", 'expect_hca_names = ["a", "b", "c"]\n')
    assert error_of("azure-hbv3", site) == (
        f"{site}: expect_hca_names: expected at most 1 names (expect_hcas = 1, from "
        f"{profile_source('azure-hbv3')}), got 3"
    )


def test_ignoring_an_expected_hca():
    assert error_of("azure-ndv5", ignore_hcas=("mlx5_*",)) == (
        "command line: ignore_hcas: expected HCA 'mlx5_ib0' is also ignored by pattern "
        f"'mlx5_*' (expect_hca_names from {profile_source('azure-ndv5')}); an ignored HCA "
        "always reads as missing"
    )


def test_rate_warn_above_the_catalogue_fail_rate(tmp_path):
    site = write(tmp_path, "site.toml", "[counters.symbol_error]\nrate_warn_per_hour = 200\n")
    assert error_of(None, site) == (
        f"{site}: counters.symbol_error.rate_warn_per_hour: expected at most "
        "rate_fail_per_hour (120, from the catalogue default), got 200"
    )


def test_rate_fail_below_the_warn_rate_set_earlier(tmp_path):
    mine = write(tmp_path, "mine.toml", "[counters.port_xmit_discards]\nrate_warn_per_hour = 50\n")
    site = write(tmp_path, "site.toml", "[counters.port_xmit_discards]\nrate_fail_per_hour = 10\n")
    assert error_of(mine, site) == (
        f"{site}: counters.port_xmit_discards.rate_fail_per_hour: expected at least "
        f"rate_warn_per_hour (50, from profile {mine}), got 10"
    )


# --- config show --------------------------------------------------------------------------


def _round_trip(effective) -> Dict[str, object]:
    text = render_show(effective)
    data = tomllib.loads(text)
    assert Thresholds.model_validate(data) == effective.thresholds
    for name, rule in effective.thresholds.counters.items():
        assert Thresholds.model_validate(data).counters[name].model_fields_set == (
            rule.model_fields_set
        )
    return data


def test_render_show_lists_every_setting_with_its_source(tmp_path):
    site = write(
        tmp_path,
        "site.toml",
        """
        expect_rate_gbps = 200
        [counters.symbol_error]
        rate_fail_per_hour = 500
        """,
    )
    effective = load("azure-ndv5", site, ignore_hcas=("mlx5_an*", "mlx5_x*"))
    text = render_show(effective)
    lines = text.splitlines()
    ndv5 = profile_source("azure-ndv5")
    assert lines[:6] == [
        "# profile: azure-ndv5",
        f"expect_hcas = 8  # {ndv5}",
        "expect_hca_names = [" + ", ".join(f'"{n}"' for n in NDV5_NAMES) + f"]  # {ndv5}",
        f"expect_rate_gbps = 200.0  # config {site}",
        'ignore_hcas = ["mlx5_an*", "mlx5_x*"]  # command line',
        "ignore_ethernet = false  # default",
    ]
    assert "[counters.symbol_error]" in lines
    assert f"rate_fail_per_hour = 500.0  # config {site}" in lines
    assert '# on_increase = "warn"  # catalogue default' in lines
    assert render_show(effective) == text  # stable
    _round_trip(effective)


def test_render_show_of_the_defaults_round_trips():
    effective = load()
    text = render_show(effective)
    assert text.splitlines()[:3] == [
        "# profile: generic",
        "# expect_hcas = <not set>  # default",
        "expect_hca_names = []  # default",
    ]
    defaults = Thresholds()
    assert _round_trip(effective) == {
        "expect_hca_names": [],
        "ignore_hcas": [],
        "ignore_ethernet": False,
        **{  # level full's, the history's, the physical layer's and the PCIe path's
            name: getattr(defaults, name)
            for name in Thresholds.model_fields
            if name.startswith(
                (
                    "perftest_",
                    "nccl_",
                    "straggler_",
                    "flap_",
                    "drop_",
                    "temperature_",
                    "ber_",
                    "fec_",
                    "aer_",
                    "subnets_",
                )
            )
            and getattr(defaults, name) is not None
        },
        **{  # the misconfiguration expectations: each default is shown
            name: getattr(defaults, name)
            for name in ("expect_ib_mtu", "expect_issm", "expect_pkeys")
        },
    }
    assert _round_trip(effective)["perftest_min_fraction"] == 0.9


@pytest.mark.parametrize("name", SHIPPED)
def test_render_show_round_trips_every_profile(name):
    _round_trip(load(name))


def test_render_show_escapes_strings_and_round_trips(tmp_path):
    mine = write(
        tmp_path,
        "mine.toml",
        r"""
        ignore_hcas = ["quote\"back\\slash", "tab\there", "unicode-é-😀", "del\u007f"]
        [counters.link_downed]
        lifetime_limit = 0
        [counters.port_rcv_errors]
        on_increase = "info"
        rate_warn_per_hour = 0.5
        """,
    )
    _round_trip(load(mine))


# --- the quick path -----------------------------------------------------------------------


def test_nothing_set_is_the_validated_defaults_without_building_the_validator():
    """The usual prolog (generic profile, no site config, no flags) has nothing to validate:
    its Thresholds are made without building the model's validator (the largest cost of
    reading the configuration), and are exactly what validating nothing gives."""
    code = (
        "from ibdiag.config import load_effective\n"
        "from ibdiag.thresholds import Thresholds\n"
        "th = load_effective(None, None, {}).thresholds\n"
        "built = Thresholds.__pydantic_complete__\n"
        "print(built, th.model_fields_set == set(), th == Thresholds.model_validate({}))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert proc.stdout.split() == ["False", "True", "True"]


def test_an_empty_site_config_and_profile_are_the_defaults(tmp_path):
    empty = write(tmp_path, "empty.toml", "# nothing set\n")
    site = write(tmp_path, "site.toml", f'profile = "{empty}"\n')
    effective = load(None, site)
    assert effective.thresholds == Thresholds.model_validate({})
    assert effective.thresholds.model_fields_set == set()
    assert effective.sources == {}
    assert effective.profile == empty


def test_config_module_imports_neither_jinja2_nor_sh():
    code = "import sys, ibdiag.config; print(sorted({'jinja2', 'sh'} & set(sys.modules)))"
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert proc.stdout.strip() == "[]"


# -- bounds and many patterns (issue 12 item 12) -------------------------------------------------


BIG = "100000000000000000000000000"  # 10^26


@pytest.mark.parametrize(
    ("line", "said"),
    [
        (f"expect_hcas = {BIG}", "expect_hcas: expected a whole number of at most 1024"),
        (f"[counters.symbol_error]\nlifetime_limit = {BIG}",
         f"symbol_error.lifetime_limit: expected a whole number of at most {2**64}"),
        ("[counters.symbol_error]\nrate_fail_per_hour = inf", "expected a finite number, got inf"),
        ("expect_rate_gbps = nan", "expect_rate_gbps: expected a finite number"),
        ("expect_ipoib_mtu = 1000000", "expect_ipoib_mtu: expected a whole number of at most"),
        # what goes on level full's command lines is refused here, not when the argv is built
        ('nccl_tests = "-rf"', "nccl_tests: expected a program path"),
        ('nccl_launcher_args = ["-H", ""]', "nccl_launcher_args[1]: expected a non-empty string"),
        ('nccl_launcher_args = ["\\u0000"]', "nccl_launcher_args[0]: expected an argument without"),
        ("perftest_qps = 100000", "perftest_qps: expected a whole number of at most 64"),
    ],
)  # fmt: skip
def test_a_value_beyond_any_real_setting_is_one_line_exit_3(run_cli, tmp_path, line, said):
    config = tmp_path / "ibdiag.toml"
    config.write_text(line + "\n")
    result = run_cli("config", "show", "--config", str(config))
    assert result.exit_code == 3
    assert result.stderr.startswith(f"ibdiag: error: {config}: ") and said in result.stderr
    assert result.stderr.count("\n") == 1


def test_thousands_of_ignore_patterns_are_refused_and_a_thousand_match_like_fnmatch(
    run_cli, tmp_path
):
    import fnmatch

    from ibdiag.thresholds import MAX_IGNORE_PATTERNS, Thresholds

    config = tmp_path / "ibdiag.toml"
    config.write_text(f"ignore_hcas = {[f'mlx5_an{i}*' for i in range(50_000)]!r}\n")
    result = run_cli("config", "show", "--config", str(config))
    assert result.exit_code == 3 and f"at most {MAX_IGNORE_PATTERNS}" in result.stderr

    patterns = [f"mlx5_an{i}*" for i in range(MAX_IGNORE_PATTERNS - 3)] + [
        "ib?",
        "*roce*",
        "x[0-9]",
    ]
    th = Thresholds(ignore_hcas=patterns)
    for name in ("mlx5_an17", "mlx5_an9999", "ib0", "ib10", "bond_roce_1", "x7", "xa", "mlx5_0"):
        expected = any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)
        assert th.ignores(name) is expected, name


def test_every_pattern_a_config_value_must_match_says_what_it_means():
    """A config value that does not match a pattern is refused as "expected <what it
    means>", never as the bare regular expression."""
    from ibdiag.thresholds import PATTERN_MEANS

    def patterns(node):
        if isinstance(node, dict):
            yield from ([node["pattern"]] if isinstance(node.get("pattern"), str) else [])
            for value in node.values():
                yield from patterns(value)
        elif isinstance(node, list):
            for value in node:
                yield from patterns(value)

    found = set(patterns(Thresholds.model_json_schema()))
    assert found == set(PATTERN_MEANS), found ^ set(PATTERN_MEANS)
