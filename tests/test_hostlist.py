"""Host lists as Slurm and MPI launchers write them (ibdiag.hostlist)."""

from __future__ import annotations

import pytest

from ibdiag.hostlist import MAX_HOSTS, HostlistError, expand, named_in_launcher_args


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
