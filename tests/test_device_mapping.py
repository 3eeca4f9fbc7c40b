"""Worker -> GPU mapping with faked device counts (no GPU needed), and the ``-n auto`` hook."""
from __future__ import annotations

import pytest

from pytest_privleak.distribute import device as dev


@pytest.mark.parametrize(("worker", "count", "expected"), [
    (None, 0, "cpu"), ("gw0", 0, "cpu"), (None, 2, "cuda:0"), ("gw0", 2, "cuda:0"), ("gw1", 2, "cuda:1"),
    ("gw2", 2, "cuda:0"), ("gw5", 4, "cuda:1"), ("master", 3, "cuda:0"),
])
def test_auto_maps_worker_k_to_gpu_k_mod_count(worker, count, expected):
    assert dev.choose_device("auto", worker, count) == expected


def test_explicit_device_list_is_used_in_turn_and_two_workers_may_share_a_gpu():
    devices = ["cuda:0", "cuda:0", "cuda:1"]
    assert [dev.choose_device("auto", f"gw{k}", 0, devices) for k in range(4)] == [
        "cuda:0", "cuda:0", "cuda:1", "cuda:0"]


def test_bad_requests_name_the_option_and_the_fix():
    with pytest.raises(ValueError, match=r"--privleak-device=cuda:3 but only 2 CUDA device\(s\)"):
        dev.choose_device("cuda:3", "gw0", 2)
    with pytest.raises(ValueError, match="no CUDA device is visible; use auto or cpu"):
        dev.choose_device("cuda", None, 0)
    with pytest.raises(ValueError, match="--privleak-devices='gpu0' is not a device"):
        dev.parse_device_list("gpu0")


def test_gpu_count_from_environment_or_device_files(tmp_path):
    assert dev.gpu_count_without_init({"CUDA_VISIBLE_DEVICES": "0,2,3"}) == 3
    assert dev.gpu_count_without_init({"CUDA_VISIBLE_DEVICES": "1,-1,2"}) == 1  # CUDA stops at -1
    assert dev.gpu_count_without_init({"CUDA_VISIBLE_DEVICES": ""}) == 0
    for name in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm", "null"):
        (tmp_path / name).touch()
    assert dev.gpu_count_without_init({}, dev=tmp_path) == 2
    assert dev.gpu_count_without_init({}, dev=tmp_path / "absent") is None


def test_a_dev_folder_without_nvidia_files_means_no_gpu_so_torch_is_not_needed(tmp_path):
    for name in ("null", "nvidiactl", "tty0"):  # nvidiactl alone is a driver without a GPU
        (tmp_path / name).touch()
    assert dev.gpu_count_without_init({}, dev=tmp_path) == 0
    assert dev.gpu_count_without_init({"CUDA_VISIBLE_DEVICES": "0,1"}, dev=tmp_path) == 2  # the variable wins
    assert dev.auto_num_workers(None, "auto", dev.gpu_count_without_init({}, dev=tmp_path)) is None  # xdist: CPUs
    (tmp_path / "kfd").touch()  # an AMD ROCm machine: only torch can count its GPUs
    assert dev.gpu_count_without_init({}, dev=tmp_path) is None


def test_pinning_narrows_cuda_visible_devices_to_the_workers_gpu():
    env = {}
    assert dev.pin_worker_gpu(env, "gw3", 2, torch_imported=False) == "1"
    assert env["CUDA_VISIBLE_DEVICES"] == "1" and env["PRIVLEAK_PINNED_GPU"] == "1"
    # inside the pinned worker only that GPU is visible, so the device is cuda:0
    assert dev.choose_device("auto", "gw3", dev.gpu_count_without_init(env)) == "cuda:0"
    env = {"CUDA_VISIBLE_DEVICES": "4,6,7"}
    assert dev.pin_worker_gpu(env, "gw1", 3, torch_imported=False) == "6"
    assert env["CUDA_VISIBLE_DEVICES"] == "6"


@pytest.mark.parametrize(("kwargs", "why"), [
    ({"worker": None}, "no xdist"),
    ({"torch_imported": True}, "torch already imported: keep all GPUs, use cuda:K"),
    ({"count": 1}, "one GPU: nothing to split"),
    ({"count": None}, "count unknown"),
    ({"devices": ["cuda:1"]}, "explicit list is used as given"),
    ({"requested": "cpu"}, "cpu requested"),
])
def test_pinning_leaves_the_environment_alone_when_it_should(kwargs, why):
    env = {"CUDA_VISIBLE_DEVICES": "0,1"}
    args = {"worker": "gw1", "count": 2, "torch_imported": False, **kwargs}
    assert dev.pin_worker_gpu(env, **args) is None, why
    assert env == {"CUDA_VISIBLE_DEVICES": "0,1"}


def test_auto_num_workers_is_one_per_gpu_or_left_to_xdist():
    assert dev.auto_num_workers(None, "auto", 4) == 4
    assert dev.auto_num_workers(["cuda:0", "cuda:0", "cuda:1"], "auto", 2) == 3
    assert dev.auto_num_workers(None, "auto", 0) is None
    assert dev.auto_num_workers(None, "cpu", 4) is None


def test_xdist_auto_hook_counts_gpus_from_the_environment(pytester: pytest.Pytester, monkeypatch):
    from pytest_privleak.plugin import pytest_xdist_auto_num_workers

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2")
    assert pytest_xdist_auto_num_workers(pytester.parseconfig()) == 3
    assert pytest_xdist_auto_num_workers(pytester.parseconfig("--privleak-devices=cuda:0,cuda:1")) == 2
    assert pytest_xdist_auto_num_workers(pytester.parseconfig("--privleak-device=cpu")) is None
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert pytest_xdist_auto_num_workers(pytester.parseconfig()) is None


def test_n_auto_starts_one_worker_per_gpu_and_each_pins_its_own(pytester: pytest.Pytester, monkeypatch):
    """Three fake GPUs (only the environment says so; nothing touches CUDA): three workers, not CPU count."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2")
    pytester.makepyfile(test_gpu='''
        import os, pytest

        @pytest.mark.parametrize("i", range(6))
        def test_where(i):
            w = os.environ["PYTEST_XDIST_WORKER"]
            assert os.environ["CUDA_VISIBLE_DEVICES"] == w[2:]
    ''')
    result = pytester.runpytest_subprocess("-n", "auto", "--privleak-report=rep")
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines(["*created: 3/3 workers*"])
    import json

    workers = json.loads((pytester.path / "rep" / "report.json").read_text())["run"]["workers"]
    assert {w["id"]: w["gpu"] for w in workers} == {"gw0": "0", "gw1": "1", "gw2": "2"}


def test_controller_counts_gpus_without_importing_torch():
    """``-n auto`` asks in the controller; with a readable /dev (GPUs or none) torch stays unimported."""
    import os
    import subprocess
    import sys

    if not os.access("/dev", os.R_OK) or os.path.exists("/dev/kfd"):
        pytest.skip("this machine's GPUs can only be counted by torch")
    code = ("import sys; from pytest_privleak.distribute.device import controller_gpu_count; n = controller_gpu_count(); "
            "print(n, 'torch' in sys.modules)")
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    count, torch_imported = out.split()
    assert int(count) >= 0 and torch_imported == "False"


# --- workers on several hosts: the per-host index decides, the gw number is the fallback -------------


def test_a_worker_on_a_second_host_gets_that_hosts_first_gpu_not_the_global_number():
    # --tx 2*ssh=h1 --tx 2*ssh=h2, two GPUs per host: gw2 is h2's first worker
    gw2 = {"workerid": "gw2", "privleak_host": "h2", "privleak_local_index": 0}
    gw3 = {"workerid": "gw3", "privleak_host": "h2", "privleak_local_index": 1}
    assert dev.worker_slot(gw2) == 0 and dev.worker_slot(gw3) == 1
    assert [dev.choose_device("auto", w, 2) for w in (gw2, gw3)] == ["cuda:0", "cuda:1"]
    assert [dev.choose_device("auto", w, 2, ["cuda:1", "cuda:0"]) for w in (gw2, gw3)] == ["cuda:1", "cuda:0"]
    env = {"CUDA_VISIBLE_DEVICES": "0,1"}
    assert dev.pin_worker_gpu(env, gw3, 2, torch_imported=False) == "1"
    env = {"CUDA_VISIBLE_DEVICES": "0,1"}
    assert dev.pin_worker_gpu(env, gw2, 2, torch_imported=False) == "0"   # the gw number would give GPU 2 mod 2


def test_without_a_per_host_index_the_gw_number_is_used_as_before():
    assert dev.worker_slot({"workerid": "gw5"}) == 5
    assert dev.worker_slot({"workerid": "gw5", "privleak_local_index": True}) == 5   # not an index
    assert dev.worker_slot({"workerid": "gw5", "privleak_local_index": -1}) == 5
    assert dev.worker_slot("gw3") == 3 and dev.worker_slot(2) == 2
    assert dev.worker_slot(None) is None and dev.worker_slot({}) is None
    assert dev.choose_device("auto", {"workerid": "gw3"}, 2) == "cuda:1"
    assert dev.pin_worker_gpu({}, {}, 4, torch_imported=False) is None              # not an xdist worker


@pytest.mark.parametrize("cores, workers, threads", [(2, 2, 1), (2, 1, 2), (16, 4, 4), (2, 4, 1), (None, None, 1)])
def test_each_worker_gets_its_share_of_the_hosts_cores(cores, workers, threads):
    from pytest_privleak.distribute.device import share_cpu_threads, worker_cpu_threads

    assert worker_cpu_threads(cores, workers) == threads
    environ = {}
    assert share_cpu_threads(environ, workers, False, cores) == threads and environ["OMP_NUM_THREADS"] == str(threads)


def test_a_thread_count_the_user_set_is_kept():
    from pytest_privleak.distribute.device import share_cpu_threads

    environ = {"OMP_NUM_THREADS": "3"}
    assert share_cpu_threads(environ, 2, False, 2) is None and environ["OMP_NUM_THREADS"] == "3"


def test_under_xdist_each_local_worker_runs_torch_with_its_share_of_the_cores(pytester, monkeypatch):
    pytest.importorskip("xdist")
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    pytester.makepyfile(test_threads="""
import os
def test_threads(privleak_device):
    import torch
    cores = len(os.sched_getaffinity(0))
    assert torch.get_num_threads() == max(1, cores // 2), (torch.get_num_threads(), cores)
    assert os.environ["OMP_NUM_THREADS"] == str(max(1, cores // 2))
""")
    pytester.runpytest_subprocess("-n", "2", "-p", "no:cacheprovider").assert_outcomes(passed=1)
