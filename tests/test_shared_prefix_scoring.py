"""Scoring a canary space with the prefix once (issue 20 item 5): the same figures as the plain forward.

Models are GPT-2s built from a config (no download), random weights, over three tokenizers: a BERT WordPiece
one that frames sentences with [CLS] .. [SEP] (a tail after the secret) and spells 'colour' as two pieces
(candidates of different lengths), and the tiny GPT-2's word-level one (no tail).
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")

from helpers_transformers import word_tokenizer  # noqa: E402

from pytest_privleak.adapters import causal_prefix, from_transformers  # noqa: E402
from pytest_privleak.adapters.causal_prefix import make_plan  # noqa: E402
from pytest_privleak.attacks.candidates import enumerate_space  # noqa: E402
from pytest_privleak.attacks.exposure.attack import compute_exposure  # noqa: E402
from pytest_privleak.canaries import canary, custom_pattern  # noqa: E402
from pytest_privleak.data.types import Utterance  # noqa: E402

DIGITS = tuple("0123456789")
PREFIX = ("my", "pin", "code", "is")
#: 'colour' is two pieces (col ##our) in the test tokenizer, the others one
COLOURS = ("red", "colour", "blue", "green")


def _gpt(vocab_size: int, bos: int, seed: int = 0):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    return GPT2LMHeadModel(GPT2Config(vocab_size=vocab_size, n_positions=32, n_embd=32, n_layer=2, n_head=2,
                                      bos_token_id=bos, eos_token_id=bos)).eval()


@pytest.fixture(scope="module")
def bert_framed():
    tokenizer = word_tokenizer([*PREFIX, *DIGITS, "red", "blue", "green", "hello"])
    return from_transformers(_gpt(len(tokenizer), tokenizer.cls_token_id), tokenizer, batch_size=97)


@pytest.fixture(scope="module")
def word_level():
    from pytest_privleak.targets.tiny_gpt2 import make_tokenizer, vocabulary

    tokenizer = make_tokenizer(vocabulary())
    return from_transformers(_gpt(len(tokenizer), tokenizer.bos_token_id, seed=1), tokenizer, batch_size=97)


def _plain(scorer, prefix, words, choices) -> np.ndarray:
    return scorer.score([Utterance(prefix + tuple(words[i] for i in row), ("O",) * (len(prefix) + len(row)), "x")
                         for row in np.asarray(choices).tolist()])


#: float32 log-probabilities summed over about a dozen pieces in another order (cached keys and values):
#: a few float32 ulps of each term, well under 64 ulps of the sum
RTOL = 64 * float(np.finfo(np.float32).eps)


@pytest.mark.parametrize("setup", ["bert_framed", "word_level"])
def test_a_whole_pin_space_scores_as_the_plain_forward(setup, request):
    scorer = request.getfixturevalue(setup)
    space = enumerate_space(10, 3, budget=None)
    shared = scorer.score_with_shared_prefix(PREFIX, DIGITS, space)
    plain = _plain(scorer, PREFIX, DIGITS, space)
    assert shared.shape == (1000,) and shared.dtype == np.float64
    np.testing.assert_allclose(shared, plain, rtol=RTOL)
    assert np.unique(shared).size > 990 and np.ptp(shared) > 0.5   # the candidates really differ


def test_words_of_different_piece_counts_pad_and_still_match(bert_framed):
    plan = make_plan(bert_framed._ids, PREFIX, COLOURS, 3)
    assert plan is not None and not plan.uniform and plan.tail.tolist() == [bert_framed.tokenizer.sep_token_id]
    space = enumerate_space(len(COLOURS), 3, budget=None)
    np.testing.assert_allclose(bert_framed.score_with_shared_prefix(PREFIX, COLOURS, space),
                               _plain(bert_framed, PREFIX, COLOURS, space), rtol=RTOL)


def test_an_empty_prefix_conditions_on_the_bos_token(word_level):
    choices = np.array([[1, 2], [3, 3], [0, 9]])
    np.testing.assert_allclose(word_level.score_with_shared_prefix((), DIGITS, choices),
                               _plain(word_level, (), DIGITS, choices), rtol=RTOL)


def test_many_passes_under_a_small_memory_budget_give_the_same_scores(word_level, monkeypatch):
    space = enumerate_space(10, 3, budget=None)
    whole = word_level.score_with_shared_prefix(PREFIX, DIGITS, space)
    # 3-digit pins feed their first 2 digits (100 distinct rows): 7 rows of 2 pieces a pass, 15 passes
    monkeypatch.setattr(causal_prefix, "LOGITS_BUDGET", 4 * 2 * len(word_level.tokenizer) * 7)
    np.testing.assert_allclose(word_level.score_with_shared_prefix(PREFIX, DIGITS, space), whole, rtol=RTOL)


def test_exposure_takes_the_shared_prefix_path_and_gives_the_plain_figure(word_level, monkeypatch):
    pin = canary("pin", length=3, seed=5)

    class PlainOnly:                      # the same model seen only through score(utterances)
        def score(self, utterances):
            return word_level.score(utterances)

    plain = compute_exposure(PlainOnly(), pin, method="exact")
    calls = []
    monkeypatch.setattr(type(word_level), "score", lambda self, u: calls.append(len(u)) or pytest.fail("plain"))
    shared = compute_exposure(word_level, pin, method="exact")
    assert calls == []
    assert shared.rank == plain.rank and math.isclose(shared.value, plain.value, rel_tol=1e-9)


def test_a_plan_is_refused_when_pieces_depend_on_the_neighbours():
    # a tokenizer that ends every sentence with its word count: the tail differs by candidate length
    def counting(texts):
        return [[0, *(ord(w[0]) for w in t.split()), 100 + len(t.split())] for t in texts]

    def independent(texts):
        return [[0, *(ord(c) for w in t.split() for c in w)] for t in texts]

    assert make_plan(counting, ("a", "b"), ("x", "y"), 2) is None
    plan = make_plan(independent, ("a", "b"), ("x", "yz"), 2)
    assert plan is not None and plan.lengths.tolist() == [1, 2] and plan.common.tolist() == [0, 97, 98]


def test_a_custom_pattern_on_the_tiny_tokenizer_matches(word_level):
    pattern = custom_pattern("room", ("the", "room", "number", "is"), DIGITS, 2, "RoomIntent")
    space = enumerate_space(10, 2, budget=None)
    np.testing.assert_allclose(word_level.score_with_shared_prefix(pattern.prefix, pattern.vocabulary, space),
                               _plain(word_level, pattern.prefix, pattern.vocabulary, space), rtol=RTOL)
