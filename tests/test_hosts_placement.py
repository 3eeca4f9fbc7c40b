"""Where xdist workers run: the host of each ``--tx`` spec and each worker's index on its host (pure)."""
from __future__ import annotations

import pytest

from pytest_privleak.distribute.placement import HostPlacement, host_of_spec, is_remote_spec, local_indices, spec_strings
from pytest_privleak.plugin.hosts import cache_not_shared


@pytest.mark.parametrize(("spec", "host"), [
    ("ssh=root@10.77.0.1//python=/venv/bin/python", "10.77.0.1"),
    ("ssh=gpu-a//chdir=/srv/app", "gpu-a"),
    ("ssh=-p 2222 -o BatchMode=yes ci@gpu-b.example.org", "gpu-b.example.org"),
    ("socket=192.168.1.4:8888", "192.168.1.4"),
    ("vagrant_ssh=default", "default"),
    ("popen", "localhost"),
    ("popen//python=python3.11", "localhost"),
    ("popen//via=gw0", "via gw0"),
])
def test_the_host_is_the_machine_the_spec_names(spec, host):
    assert host_of_spec(spec) == host
    assert is_remote_spec(spec) is (host != "localhost")


def test_multipliers_expand_as_xdist_expands_them():
    assert spec_strings(["2*ssh=root@h1//python=py", "popen", "3*popen"]) == [
        "ssh=root@h1//python=py", "ssh=root@h1//python=py", "popen", "popen", "popen", "popen"]
    assert spec_strings(None) == []


def test_workers_are_numbered_per_host_not_globally():
    specs = spec_strings(["2*ssh=root@h1//python=py", "2*ssh=h2", "ssh=admin@h1"])
    assert local_indices(specs) == [("h1", 0), ("h1", 1), ("h2", 0), ("h2", 1), ("h1", 2)]
    assert local_indices(["popen"] * 3) == [("localhost", 0), ("localhost", 1), ("localhost", 2)]  # -n 3: gw number


def test_a_replacement_worker_takes_the_index_its_crashed_predecessor_freed():
    placement = HostPlacement()
    assert [placement.place("ssh=h1", f"gw{k}") for k in range(3)] == [("h1", 0), ("h1", 1), ("h1", 2)]
    assert placement.place("ssh=h2", "gw3") == ("h2", 0)
    placement.release("gw1")                           # gw1 on h1 died; xdist starts gw4 with the same spec
    assert placement.place("ssh=h1", "gw4") == ("h1", 1)
    assert placement.place("ssh=h1", "gw4") == ("h1", 1)   # asked twice: the same answer
    assert placement.place("ssh=h1", "gw5") == ("h1", 3)


def test_a_folder_cache_with_workers_on_other_hosts_is_warned_about_and_a_url_is_not(tmp_path):
    warning = cache_not_shared(["ssh=root@h1", "ssh=h2", "popen"], tmp_path / ".privleak-cache")
    assert warning.startswith("--tx workers on h1, h2 with a target cache in a folder")
    assert "each host trains its own copy" in warning and "--privleak-cache-dir=sftp://" in warning
    assert cache_not_shared(["ssh=h1"], "sftp://cachehost/srv/privleak") is None
    assert cache_not_shared(["popen", "popen"], tmp_path) is None           # -n 2: one machine, one folder
