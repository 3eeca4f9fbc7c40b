"""A built-in target's seed stack under xdist (issue 35): half trained by the worker that needs it, half by a
worker out of tests through the job board; the weights are those of one stack."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from pytest_privleak.cache.targets import TargetCache
from pytest_privleak.canaries import canary, inject_canaries
from pytest_privleak.data import generate_snips_like
from pytest_privleak.distribute.board import Board
from pytest_privleak.targets import parallel, train_target
from pytest_privleak.targets.parallel import NotPortable, spread_stack
from pytest_privleak.targets.parallel.stacks import StackTraining, from_stack_job, to_stack_job
from pytest_privleak.targets.seeds import train_target_seeds

pytestmark = pytest.mark.filterwarnings("ignore::pytest_privleak.cache.manifest.UnsignedCacheWarning")

DATA = inject_canaries(generate_snips_like(n_train=200, n_valid=20, n_test=10, seed=0), canary("pin", 4, seed=1),
                       repeats=5)
CONFIG = {"epochs": 3, "batch_size": 16, "embedding_dim": 16, "hidden_dim": 16, "dropout": 0.1, "progress": False}

HELPER = """
import sys
sys.path[:0] = {paths!r}
from pytest_privleak.distribute.board import Board
from pytest_privleak.targets.parallel import help_others
import pytest_privleak.targets.joint_nlu  # imported before "ready", as in a worker
print("ready", flush=True)
print(help_others(Board({folder!r}, "gw1"), device="cpu", poll=0.05))
"""


@pytest.fixture
def spread():
    previous = parallel.configure(1)
    yield parallel
    parallel.configure(previous.processes, previous.board)


def weights(models) -> list[dict]:
    return [{n: t.clone() for n, t in m.net.state_dict().items()} for m in models]


def same(a: list[dict], b: list[dict]) -> bool:
    return len(a) == len(b) and all(torch.equal(x[n], y[n]) for x, y in zip(a, b) for n in x)


def test_a_stack_job_is_json_and_keys_each_seed_as_train_target_does(tmp_path):
    cache = TargetCache(tmp_path)
    stack = StackTraining("joint-bilstm-crf", DATA, (2, 3), cache, "cpu", dict(CONFIG))
    job = to_stack_job(stack)
    assert job["type"] == "stack" and job["seeds"] == [2, 3] and job["kind"] == "joint-bilstm-crf"
    again = from_stack_job(json.loads(json.dumps(job)))
    assert again.key() == stack.key() and not again.published(again.key())
    trained = [train_target("joint-bilstm-crf", DATA, cache=cache, seed=s, **CONFIG) for s in (2, 3)]
    assert stack.model_keys == [m.content_hash for m in trained] and stack.published(stack.key())


def test_a_stack_that_cannot_travel_stays_here(tmp_path, spread):
    board = Board(tmp_path / "board", "gw0")
    spread.configure(1, board)
    cache = TargetCache(tmp_path / "cache")
    assert not spread_stack("joint-bilstm-crf", DATA, range(4), device="cpu", cache=None, config=dict(CONFIG))
    assert not spread_stack("joint-bilstm-crf", DATA, range(4), device="cuda:0", cache=cache, config=dict(CONFIG))
    assert not spread_stack("joint-bilstm-crf", DATA, range(4), device="cpu", cache=cache,
                            config={**CONFIG, "no_such_field": 1})
    with pytest.raises(NotPortable, match="not plain config data"):
        to_stack_job(StackTraining("joint-bilstm-crf", DATA, (0, 1), cache, "cpu", {**CONFIG, "epochs": object()}))
    spread.configure(1)
    assert not spread_stack("joint-bilstm-crf", DATA, range(4), device="cpu", cache=cache, config=dict(CONFIG))
    assert not list((tmp_path / "board" / "jobs").glob("*.json"))


def test_a_worker_out_of_tests_trains_the_second_half_and_the_weights_are_one_stacks(spread, tmp_path):
    """The poster (as xdist worker gw0) trains seeds 0-1 and posts 2-3; a helper process (as an idle worker gw1)
    claims and trains them; the poster loads them. The four models are bitwise those of one stack of four."""
    folder = str(tmp_path / "board")
    poster = Board(folder, "gw0")
    poster.running()
    helper = subprocess.Popen([sys.executable, "-c", HELPER.format(paths=sys.path, folder=folder)],
                              stdout=subprocess.PIPE, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    try:
        assert helper.stdout.readline().strip() == "ready"
        spread.configure(1, poster)
        spread_models = train_target_seeds("joint-bilstm-crf", DATA, seeds=4, cache=TargetCache(tmp_path / "cache"),
                                           **{**CONFIG, "epochs": 12})
    finally:
        poster.finished()
        out, _ = helper.communicate(timeout=300)
        helper.stdout.close()
    spread.configure(1)
    one_stack = train_target_seeds("joint-bilstm-crf", DATA, seeds=4, cache=TargetCache(tmp_path / "again"),
                                   **{**CONFIG, "epochs": 12})
    assert same(weights(spread_models), weights(one_stack))
    assert helper.returncode == 0 and int(out.split()[-1]) == 1, out     # the helper trained the second stack
    assert not list((Path(folder) / "jobs").glob("*.json"))              # withdrawn
