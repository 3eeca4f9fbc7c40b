"""Warm means cached under any -n (issue 24 item 6): a result is keyed by what determines it.

An xdist worker runs torch with its share of the cores, so ``-n 0`` and ``-n 2`` use different thread
counts. Scoring attacks give the same figures at any count (measured here, bitwise), so their key leaves
the count out; attacks that train or encode inside keep it.
"""
from __future__ import annotations

import hashlib

import pytest
import torch

from pytest_privleak.attacks.cea.attack import extract
from pytest_privleak.attacks.cea.assertion import _scores_every_secret
from pytest_privleak.attacks.exposure.attack import compute_exposure
from pytest_privleak.cache import results as rc
from pytest_privleak.canaries import canary, inject_canaries
from pytest_privleak.data import generate_snips_like
from pytest_privleak.targets import train_target


class Hashed:
    pass


@pytest.fixture
def hashed():
    model = Hashed()
    rc.mark_content_hash(model, hashlib.sha256(b"model").hexdigest())
    return model


@pytest.fixture
def threads():
    before = torch.get_num_threads()
    yield torch.set_num_threads
    torch.set_num_threads(before)


def test_scoring_attacks_are_keyed_without_the_thread_count_and_training_attacks_with_it(hashed, threads):
    keys = {}
    for count in (1, 2):
        threads(count)
        keys[count] = {attack: rc.result_key(attack, [hashed], {"x": 1})
                       for attack in ("exposure", "d-exposure", "ldp", "membership", "embedding-inversion",
                                      "keyword-inference", "mix-and-match", "cea")}
    assert all(keys[1][a] == keys[2][a] for a in rc.THREAD_FREE_ATTACKS)
    assert all(keys[1][a] != keys[2][a] for a in ("cea",))
    threads(1)
    exhaustive = rc.result_key("cea", [hashed], {"x": 1}, threads_matter=False)
    threads(2)
    assert rc.result_key("cea", [hashed], {"x": 1}, threads_matter=False) == exhaustive


def test_cea_counts_as_scoring_only_when_every_canary_is_scored_exhaustively():
    pin, long_pin = canary("pin", length=4), canary("pin", length=8)
    assert _scores_every_secret(pin, "auto", 10 ** 5) and _scores_every_secret([pin], "exhaustive", 10)
    assert not _scores_every_secret([pin, long_pin], "auto", 10 ** 5)
    assert not _scores_every_secret(pin, "gradient", 10 ** 5)


def test_exposure_and_exhaustive_cea_give_bitwise_equal_figures_with_one_and_two_threads(threads):
    pins = [canary("pin", seed=1), canary("pin", seed=99)]   # one said 10 times, one never said
    data = inject_canaries(generate_snips_like(n_train=400, n_valid=60, n_test=60, seed=0), pins[:1], repeats=10)
    model = train_target("joint-bilstm-crf", data, epochs=3, cache=None)
    figures = {}
    for count in (1, 2):
        threads(count)
        figures[count] = [(compute_exposure(model, c).value, compute_exposure(model, c).canary_score,
                           extract(model, [c], method="exhaustive", budget=None).ranks[0]) for c in pins]
    assert figures[1] == figures[2]        # by how much the count changes them: not at all, to the last bit
