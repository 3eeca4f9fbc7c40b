"""The pretrained base as a free reference (issue 33 item 3): the error-zone statistic by hand, the causal-LM
adapter's ``base=``, and the method joining ``auto`` with no reference trained."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from pytest_privleak.attacks.membership.attack import measure_methods, membership_inference
from pytest_privleak.attacks.membership.base_reference import base_statistics, error_zone
from pytest_privleak.data.types import Utterance

transformers = pytest.importorskip("transformers")


def test_the_error_zone_by_hand():
    # pieces 0..4; the target misses pieces 1, 2 and 4 (its most likely piece is another one there)
    target = np.array([-0.1, -2.0, -1.0, -0.2, -3.0])
    hits = np.array([True, False, False, True, False])
    base = np.array([-0.5, -3.0, -0.5, -0.1, -3.5])
    # shifts d = target - base: 0.4, 1.0, -0.5, -0.1, 0.5; in the zone (1, 2, 4): up 1.5, down 0.5
    ez, shift = error_zone(target, hits, base)
    assert ez == pytest.approx(math.log(1.5 / 0.5)) and shift == pytest.approx(1.3)
    # fewer than two error positions: all pieces count (up 0.4 + 1.0 + 0.5, down 0.5 + 0.1)
    ez, _ = error_zone(target, np.array([True, True, False, True, True]), base)
    assert ez == pytest.approx(math.log(1.9 / 0.6))
    # every shift upward: +inf (the strongest member), every shift downward: -inf, none: 0
    assert error_zone(np.array([-0.1, -0.2]), np.array([False, False]), np.array([-1.0, -1.0]))[0] == math.inf
    assert error_zone(np.array([-2.0, -2.0]), np.array([False, False]), np.array([-1.0, -1.0]))[0] == -math.inf
    assert error_zone(np.array([-1.0, -1.0]), np.array([False, False]), np.array([-1.0, -1.0]))[0] == 0.0


class Predictions:
    """A scorer with ``token_predictions`` read from a table (and a base of the same kind)."""

    def __init__(self, table, base=None):
        self.table, self.base = table, base

    def score(self, utterances):
        return np.array([-self.table[u][0].sum() for u in utterances])

    def token_predictions(self, utterances):
        return [self.table[u] for u in utterances]

    def base_reference(self):
        return self.base


def test_records_rank_by_the_error_zone_then_by_the_whole_shift():
    records = [Utterance((f"w{i}",), ("O",), "x") for i in range(4)]
    hits = np.array([False, False])
    target = {records[0]: (np.array([-0.1, -0.1]), hits), records[1]: (np.array([-0.2, -0.1]), hits),
              records[2]: (np.array([-2.0, -0.1]), hits), records[3]: (np.array([-1.0, -1.0]), hits)}
    base = {u: (np.array([-1.0, -1.0]), hits) for u in records}
    stat, ez = base_statistics(Predictions(target), Predictions(base), records)
    # 0 and 1 both +inf (only upward shifts): 0 has the larger whole shift; 2 finite; 3 no shift at all (0)
    assert ez.tolist() == [math.inf, math.inf, pytest.approx(math.log(0.9 / 1.0)), 0.0]
    assert stat.tolist() == [3.0, 2.0, 0.0, 1.0]
    scorer = Predictions(target, base=Predictions(base))
    m = membership_inference(scorer, records[:2], records[2:], method="base")
    assert m.auc == 1.0 and m.n_references == 0 and "no reference trained" in m.detail["base reference"]


def test_without_a_base_the_method_names_the_fix():
    records = [Utterance((f"w{i}",), ("O",), "x") for i in range(4)]
    lone = Predictions({u: (np.array([-1.0]), np.array([True])) for u in records})
    with pytest.raises(ValueError, match=r"method='base' needs the pretrained model.*base=base_model"):
        membership_inference(lone, records[:2], records[2:], method="base")
    assert [m.method for m in measure_methods(lone, records[:2], records[2:])] == ["loss"]


def tiny_gpt2(vocab: int, seed: int):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    return GPT2LMHeadModel(GPT2Config(vocab_size=vocab, n_positions=16, n_embd=16, n_layer=1, n_head=2,
                                      bos_token_id=0, eos_token_id=1, pad_token_id=2)).eval()


def test_a_fine_tuned_gpt2_against_its_base_through_the_adapter():
    import copy

    from helpers_transformers import word_tokenizer
    from transformers import GPT2LMHeadModel

    from pytest_privleak.adapters import from_transformers

    words = [f"w{i}" for i in range(30)]
    tokenizer = word_tokenizer(words)
    tokenizer.bos_token, tokenizer.eos_token = "[CLS]", "[SEP]"
    base = tiny_gpt2(len(tokenizer), seed=0)
    rng = np.random.default_rng(0)
    records = list(dict.fromkeys(Utterance(tuple(rng.choice(words, 5)), ("O",) * 5, "x") for _ in range(80)))
    members, non_members = records[:30], records[30:70]
    model = copy.deepcopy(base).train()
    ids = torch.tensor([tokenizer(" ".join(u.tokens))["input_ids"] for u in members])
    optimiser = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(60):
        loss = model(input_ids=ids, labels=ids).loss
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    model.eval()
    scorer = from_transformers(model, tokenizer, base=base)
    ran = measure_methods(scorer, members, non_members, exposed=0)
    assert [m.method for m in ran] == ["loss", "zlib", "min-k", "base"]
    base_run = ran[-1]
    assert base_run.auc > 0.9 and base_run.n_references == 0
    assert membership_inference(from_transformers(model, tokenizer), members, non_members).contest[-1][0] == "min-k"
    with pytest.raises(ValueError, match="base has 10 vocabulary rows"):
        from_transformers(model, tokenizer, base=tiny_gpt2(10, seed=1))
    with pytest.raises(TypeError, match="base must be the pretrained causal LM"):
        from_transformers(model, tokenizer, base="gpt2")
    assert isinstance(scorer.base_reference().model, GPT2LMHeadModel)
