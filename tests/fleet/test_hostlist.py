"""Host lists as Slurm and MPI launchers write them (ibdiag.hostlist)."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ibdiag.hostlist import MAX_HOSTS, HostlistError, compress, expand, named_in_launcher_args


@pytest.mark.parametrize(
    ("hostlist", "hosts"),
    [
        ("gpu001", ["gpu001"]),
        ("gpu[001-003]", ["gpu001", "gpu002", "gpu003"]),
        ("gpu[001-002,017],login1", ["gpu001", "gpu002", "gpu017", "login1"]),
        ("rack[1-2]-n[08-09]", ["rack1-n08", "rack1-n09", "rack2-n08", "rack2-n09"]),
        ("n[9-11]", ["n9", "n10", "n11"]),  # no padding asked for: none added
        ("a.example.com,b.example.com", ["a.example.com", "b.example.com"]),
        ("", []),
    ],
)
def test_expand_as_slurm_does(hostlist, hosts):
    assert expand(hostlist) == hosts


@pytest.mark.parametrize("bad", ["gpu[001-003", "gpu001]", "gpu[a-b]", "n[1-99999999]"])
def test_a_host_list_that_cannot_be_expanded_says_why(bad):
    with pytest.raises(HostlistError):
        expand(bad)


def test_no_expansion_grows_past_the_limit():
    with pytest.raises(HostlistError, match=str(MAX_HOSTS)):
        expand("a[0-300]b[0-300]")


@pytest.mark.parametrize(
    ("args", "hosts"),
    [
        (["--allow-run-as-root", "-H", "gpu017:8,gpu018:8"], ["gpu017", "gpu018"]),
        (["--host=gpu1,gpu2", "-np", "16"], ["gpu1", "gpu2"]),
        (["-hosts", "a,b"], ["a", "b"]),  # MPICH / Hydra
        (["-N", "2", "-w", "gpu[01-02]"], ["gpu01", "gpu02"]),  # srun
        (["--nodelist=gpu[01-02],gpu01"], ["gpu01", "gpu02"]),  # each once
        (["--hostfile", "/etc/hosts.mpi"], []),  # its contents are not in the argv
        (["-H"], []),  # no value
        (["-w", "gpu[01-"], []),  # unreadable: skipped, never raised
    ],
)
def test_hosts_named_in_launcher_args(args, hosts):
    assert named_in_launcher_args(args) == hosts


@pytest.mark.parametrize(
    ("names", "hostlist"),
    [
        (["gpu017", "gpu003", "login1", "gpu001", "gpu002", "gpu004"], "gpu[001-004,017],login1"),
        (["gpu001", "gpu001", "gpu002"], "gpu[001-002]"),  # each once
        (["n10", "n9", "n11", "n2"], "n[2,9-11]"),  # natural order, no padding invented
        # two padding widths are two sets of hosts: never merged into one range
        (["gpu01", "gpu001", "gpu02", "gpu002"], "gpu[01-02],gpu[001-002]"),
        (["gpu099", "gpu100", "gpu101", "gpu5"], "gpu5,gpu[099-101]"),  # 100 joins 099
        # several numbers: compressed on the last one
        (["rack1-n08", "rack1-n09", "rack2-n08"], "rack1-n[08-09],rack2-n08"),
        (["gpu001.dc1", "gpu002.dc1", "gpu001.dc2"], "gpu001.dc[1-2],gpu002.dc1"),  # the last
        (["c0", "c1", "c00"], "c[0-1],c00"),
        (["login", "admin"], "admin,login"),
        ([], ""),
        ([""], ""),
    ],
)
def test_compress_as_slurm_prints(names, hostlist):
    assert compress(names) == hostlist
    assert sorted(expand(hostlist)) == sorted({n for n in names if n})


def test_compress_takes_any_iterable():
    assert compress(f"gpu{n:03d}" for n in range(1, 501)) == "gpu[001-500]"


_NAMES = st.lists(
    st.text(alphabet="ab-.0123456789", min_size=1, max_size=10)
    | st.integers(0, 1200).map(lambda n: f"gpu{n}")
    | st.integers(0, 1200).map(lambda n: f"gpu{n:03d}")
    | st.integers(0, 1200).map(lambda n: f"r{n % 3}-n{n:02d}"),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(_NAMES)
@example(["gpu01", "gpu001", "gpu1", "gpu0001"])
@example(["a0", "a00", "a0", "a1", "a01", "a10", "a010"])
def test_compress_round_trips_with_expand(names):
    hostlist = compress(names)
    hosts = expand(hostlist)
    assert len(hosts) == len(set(hosts))  # each once
    assert set(hosts) == set(names)
    assert compress(hosts) == hostlist  # a compressed list is already as short as it gets
