"""transformers adapters (pytest_privleak.adapters) on tiny models built from a config: no download.

Done-when of issue 9: CEA and exposure give the same figures through the
adapter as through a hand-written wrapper of the same model.
"""
from __future__ import annotations

import math
import sys

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")

from helpers_transformers import HandWrittenPair, bert_config, dataset_words, fine_tune, tiny_pair, word_tokenizer  # noqa: E402

from pytest_privleak.adapters import from_transformers  # noqa: E402
from pytest_privleak.attacks.cea.attack import extract  # noqa: E402
from pytest_privleak.attacks.exposure.attack import compute_exposure  # noqa: E402
from pytest_privleak.canaries import canary, inject_canaries  # noqa: E402
from pytest_privleak.data.synthetic import generate_snips_like  # noqa: E402
from pytest_privleak.data.types import Utterance  # noqa: E402

PIN = canary("pin", length=3, seed=4)


@pytest.fixture(scope="module")
def pair_setup():
    """A tiny BERT intent + slot pair fine-tuned on 80 utterances with a 3-digit pin repeated 20 times."""
    torch.set_num_threads(1)
    base = generate_snips_like(n_train=120, n_valid=10, n_test=40, seed=1)
    clean = [u for u in base.train if all(t.isalnum() for t in u.tokens)][:80]
    data = inject_canaries(base.replace(train=tuple(clean)), PIN, repeats=20)
    tokenizer = word_tokenizer(dataset_words(data, PIN.pattern.vocabulary + PIN.pattern.prefix))
    intent_model, slot_model = tiny_pair(data, tokenizer)
    fine_tune([intent_model, slot_model], tokenizer, list(data.train), steps=40)
    return data, tokenizer, intent_model, slot_model


def test_the_package_imports_no_torch_or_transformers(pytester):
    code = ("import sys, pytest_privleak.adapters as a; "
            "assert 'transformers' not in sys.modules and 'torch' not in sys.modules, sorted(sys.modules)")
    result = pytester.run(sys.executable, "-c", code)
    assert result.ret == 0, result.stderr.str()


def test_exhaustive_cea_and_exposure_match_a_hand_written_wrapper(pair_setup):
    data, tokenizer, intent_model, slot_model = pair_setup
    adapter = from_transformers(intent_model, tokenizer, slot_model=slot_model)
    hand = HandWrittenPair(intent_model, slot_model, tokenizer)
    assert adapter.mode == "pair"
    by_adapter = extract(adapter, PIN, method="exhaustive")
    by_hand = extract(hand, PIN, method="exhaustive")
    assert by_adapter.ranks == by_hand.ranks
    assert by_adapter.reconstructed == by_hand.reconstructed
    assert by_adapter.losses == pytest.approx(by_hand.losses, rel=1e-5)
    exp_adapter = compute_exposure(adapter, PIN, method="exact")
    exp_hand = compute_exposure(hand, PIN, method="exact")
    assert exp_adapter.rank == exp_hand.rank
    assert exp_adapter.value == pytest.approx(exp_hand.value, rel=1e-12)
    # the fine-tuned pair has seen the pin 18 times: it is far above the chance exposure (~1.44 bits)
    assert exp_adapter.value > 4.0, exp_adapter
    unseen = canary("pin", length=3, secret="1 6 0")       # never injected: a mid rank, equal in both
    by_adapter, by_hand = (compute_exposure(m, unseen, method="exact") for m in (adapter, hand))
    assert by_adapter.rank == by_hand.rank > 1
    assert by_adapter.value == pytest.approx(by_hand.value, rel=1e-12)


def test_gradient_cea_matches_a_hand_written_wrapper(pair_setup):
    data, tokenizer, intent_model, slot_model = pair_setup
    adapter = from_transformers(intent_model, tokenizer, slot_model=slot_model)
    hand = HandWrittenPair(intent_model, slot_model, tokenizer)
    kwargs = dict(method="gradient", trials=2, starts=2, epochs=40, seed=3)
    by_adapter, by_hand = extract(adapter, PIN, **kwargs), extract(hand, PIN, **kwargs)
    assert by_adapter.reconstructed == by_hand.reconstructed
    assert by_adapter.losses == pytest.approx(by_hand.losses, rel=1e-4)


def test_score_is_the_training_loss_batched_or_one_by_one(pair_setup):
    data, tokenizer, intent_model, slot_model = pair_setup
    adapter = from_transformers(intent_model, tokenizer, slot_model=slot_model, batch_size=7)
    hand = HandWrittenPair(intent_model, slot_model, tokenizer)
    utterances = list(data.train[:30])          # mixed lengths: padded batches in the adapter
    np.testing.assert_allclose(adapter.score(utterances), hand.score(utterances), rtol=1e-5)


def test_word_pieces_looked_up_are_the_tokenizers_own(pair_setup):
    """The adapter keeps each word's pieces (issue 9 overhead); they must be the tokenizer's pre-split pieces."""
    from pytest_privleak.adapters._pieces import WordPieces

    data, tokenizer, intent_model, slot_model = pair_setup
    pieces = WordPieces(tokenizer)
    assert pieces._cached                      # a BERT tokenizer tokenizes each pre-split word on its own
    sentences = [["my", "colour", "is", "Pin"], ["colours", "zebra", "7"], ["Colour"], list(data.train[0].tokens)]
    batch = tokenizer(sentences, is_split_into_words=True, add_special_tokens=False)
    for attempt in range(2):                   # words unseen, then looked up
        encoded = pieces.encode(sentences)
        assert encoded.ids == batch["input_ids"], attempt
        for i, starts in enumerate(encoded.first):
            words = batch.word_ids(i)
            assert starts == [p for p, w in enumerate(words) if p == 0 or words[p - 1] != w]
    assert encoded.ids[0][1:3] == tokenizer.convert_tokens_to_ids(["col", "##our"])   # two pieces, one word


def test_single_models_and_a_joint_model_with_both_heads(pair_setup):
    data, tokenizer, intent_model, slot_model = pair_setup
    rows = data.train[:5]
    both = from_transformers(intent_model, tokenizer, slot_model=slot_model).score(rows)
    intent_only = from_transformers(intent_model, tokenizer)
    slots_only = from_transformers(slot_model, tokenizer)
    assert (intent_only.mode, slots_only.mode) == ("intent", "slots")
    np.testing.assert_allclose(intent_only.score(rows) + slots_only.score(rows), both, rtol=1e-5)

    class Joint(torch.nn.Module):
        """One model, both heads: shares the intent model's encoder (a user's JointBERT)."""

        def __init__(self):
            super().__init__()
            self.bert, self.intent, self.slot = intent_model.bert, intent_model.classifier, slot_model.classifier

        def get_input_embeddings(self):
            return self.bert.get_input_embeddings()

        def forward(self, input_ids=None, inputs_embeds=None, attention_mask=None):
            out = self.bert(input_ids=input_ids, inputs_embeds=inputs_embeds, attention_mask=attention_mask)
            return self.intent(out.pooler_output), self.slot(out.last_hidden_state)

    joint = from_transformers(Joint(), tokenizer, intent_labels=intent_model.config.label2id,
                              slot_labels=slot_model.config.label2id)
    assert joint.mode == "joint"
    report = extract(joint, PIN, method="exhaustive")
    assert report.ranks[0] >= 1 and np.isfinite(joint.score(rows)).all()


def test_vocabulary_is_single_piece_words_and_explains_the_others(pair_setup):
    data, tokenizer, intent_model, slot_model = pair_setup
    adapter = from_transformers(intent_model, tokenizer)
    assert {"my", "pin", "code", "is", "7"} <= set(adapter.vocabulary)
    assert not {"[CLS]", "[SEP]", "[PAD]", "[MASK]", "[UNK]", "##our", "col##our"} & set(adapter.vocabulary)
    assert adapter.input_embeddings().shape == (len(adapter.vocabulary), 32)
    row = adapter.vocabulary.index("pin")
    torch.testing.assert_close(adapter.input_embeddings()[row],
                               intent_model.get_input_embeddings().weight[tokenizer.convert_tokens_to_ids("pin")])
    assert "2 word pieces ['col', '##our']" in adapter.explain_missing("colour")
    assert "normalised" in adapter.explain_missing("Pin")
    assert "unknown token" in adapter.explain_missing("zebra")


def test_bfloat16_model_runs_in_its_dtype(pair_setup):
    data, tokenizer, intent_model, slot_model = pair_setup
    import copy

    half = copy.deepcopy(intent_model).to(torch.bfloat16)
    adapter = from_transformers(half, tokenizer)
    assert adapter.input_embeddings().dtype == torch.bfloat16
    full = from_transformers(intent_model, tokenizer).score(data.train[:8])
    # bfloat16 keeps 8 bits of mantissa: losses agree to a few per cent, not to float32 precision
    np.testing.assert_allclose(adapter.score(data.train[:8]), full, rtol=0.1, atol=0.05)
    report = extract(adapter, PIN, method="gradient", epochs=5, trials=1, starts=1)
    assert all(math.isfinite(x) for x in report.losses)


def _lm_setup():
    from transformers import BertForMaskedLM, GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    words = ["my", "pin", "code", "is", *"0123456789", "hello", "world"]
    tokenizer = word_tokenizer(words)
    mlm = BertForMaskedLM(bert_config(len(tokenizer), ["x"])).eval()
    gpt = GPT2LMHeadModel(GPT2Config(vocab_size=len(tokenizer), n_positions=32, n_embd=32, n_layer=2, n_head=2,
                                     bos_token_id=tokenizer.cls_token_id)).eval()
    return tokenizer, mlm, gpt


def test_masked_lm_pseudo_log_likelihood_by_hand():
    tokenizer, mlm, _ = _lm_setup()
    scorer = from_transformers(mlm, tokenizer, batch_size=3)
    utterances = [Utterance(("my", "pin", "code", "is", "1", "2"), ("O",) * 6, "x"),
                  Utterance(("hello", "world"), ("O", "O"), "x")]
    expected = []
    for u in utterances:
        ids = tokenizer(" ".join(u.tokens))["input_ids"]
        total = 0.0
        for p in range(1, len(ids) - 1):      # every piece but [CLS] and [SEP], masked alone
            masked = list(ids)
            masked[p] = tokenizer.mask_token_id
            with torch.no_grad():
                logits = mlm(input_ids=torch.tensor([masked])).logits[0, p]
            total -= float(torch.log_softmax(logits, -1)[ids[p]]) / math.log(2)
        expected.append(total)
    np.testing.assert_allclose(scorer.score(utterances), expected, rtol=1e-5)


def test_causal_lm_log_perplexity_by_hand():
    tokenizer, _, gpt = _lm_setup()
    scorer = from_transformers(gpt, tokenizer, batch_size=2)
    utterances = [Utterance(("my", "pin", "code", "is", "1", "2"), ("O",) * 6, "x"),
                  Utterance(("hello",), ("O",), "x"), Utterance(("world", "hello"), ("O", "O"), "x")]
    expected = []
    for u in utterances:
        ids = tokenizer(" ".join(u.tokens))["input_ids"]      # [CLS] pieces [SEP]: [CLS] is the bos here
        with torch.no_grad():
            logp = torch.log_softmax(gpt(input_ids=torch.tensor([ids])).logits[0], -1)
        expected.append(-sum(float(logp[t - 1, ids[t]]) for t in range(1, len(ids))) / math.log(2))
    np.testing.assert_allclose(scorer.score(utterances), expected, rtol=1e-5)


def test_exposure_runs_on_language_models():
    tokenizer, mlm, gpt = _lm_setup()
    pin = canary("pin", length=2, seed=0)
    for model in (mlm, gpt):
        result = compute_exposure(from_transformers(model, tokenizer), pin, method="exact")
        assert result.space_size == 100 and 0.0 <= result.value <= math.log2(100)
