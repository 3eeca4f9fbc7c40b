"""Issue 21: the undefended built-in targets train the paper's model, with no word dropout unless it is named.

Word dropout (``unk_alpha > 0``) is a regulariser: on a corpus with a real-sized
vocabulary it hid a pin the paper's model extracts (the slow test in
``test_word_dropout_hides_memorisation.py``). By default no training token is
ever replaced by ``<unk>``, and the ``<unk>`` row is set after training from
the rare words (``set_unk_row_from_rare_words``).
"""
import pytest
import torch

from pytest_privleak.canaries import canary, inject_canaries
from pytest_privleak.data.synthetic import generate_snips_like
from pytest_privleak.data.types import Utterance
from pytest_privleak.targets import joint_nlu, lstm_lm, train_target, unk_training
from pytest_privleak.targets.unk_training import (DEFAULT_UNK_ALPHA, WORD_DROPOUT_ALPHA, rare_words,
                                                  set_unk_row_from_rare_words)
from pytest_privleak.targets.vocab import UNK_ID, Vocabulary

TINY = {"joint-bilstm-crf": dict(epochs=1, batch_size=32, embedding_dim=8, hidden_dim=8),
        "lstm-lm": dict(epochs=1, batch_size=32, embedding_dim=8, hidden_dim=16)}
MODULES = {"joint-bilstm-crf": joint_nlu, "lstm-lm": lstm_lm}


@pytest.fixture(scope="module")
def data():
    return inject_canaries(generate_snips_like(n_train=120, n_valid=20, n_test=0, seed=5),
                           canary("pin", secret="1 2 3 4"), repeats=10)


def test_the_default_configs_carry_no_word_dropout():
    assert DEFAULT_UNK_ALPHA == 0.0 and WORD_DROPOUT_ALPHA == 0.25
    assert joint_nlu.JointNLUConfig().unk_alpha == 0.0 and lstm_lm.LSTMLMConfig().unk_alpha == 0.0
    # the paper's defences are off by default too (canary-extraction-nlu §6)
    config = joint_nlu.JointNLUConfig()
    assert (config.dropout, config.early_stopping, config.char_embeddings) == (0.0, False, False)


@pytest.mark.parametrize("kind", sorted(TINY))
@pytest.mark.parametrize("unk_alpha", [None, WORD_DROPOUT_ALPHA])
def test_training_feeds_unk_only_when_word_dropout_is_named(kind, unk_alpha, data, monkeypatch):
    """Count the training tokens replaced by <unk>: none by default, some with unk_alpha=0.25 (a defence)."""
    replaced = []
    original = unk_training.drop_to_unk

    def counting(ids, probabilities, uniform=None):
        out = original(ids, probabilities, uniform)
        replaced.append(int((out != ids).sum()))
        return out

    monkeypatch.setattr(unk_training, "drop_to_unk", counting)   # the stacked training's word dropout
    config = dict(TINY[kind]) if unk_alpha is None else dict(TINY[kind], unk_alpha=unk_alpha)
    model = train_target(kind, data, seed=0, progress=False, **config)
    if unk_alpha is None:   # no word dropout: nothing is drawn, nothing replaced
        assert model.config.unk_alpha == 0.0 and sum(replaced) == 0
    else:
        assert replaced, "the training loop no longer goes through drop_to_unk; this test says nothing"
        assert sum(replaced) > 0


def test_rare_words_are_the_rarest_share_of_word_types_by_hand():
    """Counts a:1 b:2 c:3 d..k:5 (11 types): the 10 % quantile (index 1) has count 2, so a and b are rare."""
    tokens = ["a"] + ["b"] * 2 + ["c"] * 3 + [w for w in "defghijk" for _ in range(5)]
    train = (Utterance(tuple(tokens), ("O",) * len(tokens), "I"),)
    assert rare_words(train) == ("a", "b")
    assert rare_words(train, share=0.0) == ("a",)
    assert rare_words(train, share=0.25) == ("a", "b", "c")
    assert rare_words(()) == ()


def test_set_unk_row_from_rare_words_sets_only_that_row_to_their_mean():
    from pytest_privleak.data.types import NLUDataset

    train = (Utterance(("a", "b", "b", "c", "c", "c", "c"), ("O",) * 7, "I"),)
    vocab = Vocabulary.from_dataset(NLUDataset(train, (), ()))
    weight = torch.arange(len(vocab.tokens) * 3, dtype=torch.float32).reshape(-1, 3)
    before = weight.clone()
    assert set_unk_row_from_rare_words(weight, vocab, train, share=0.5) == ("a", "b")
    a, b = vocab.token_ids(["a", "b"], strict=True)
    assert torch.equal(weight[UNK_ID], (before[a] + before[b]) / 2)
    others = torch.arange(len(vocab.tokens)) != UNK_ID
    assert torch.equal(weight[others], before[others])


@pytest.mark.parametrize("kind", sorted(TINY))
def test_an_unseen_word_reads_the_rare_words_mean_and_untrained_tokens_share_it(kind, data):
    model = train_target(kind, data, seed=0, progress=False, **TINY[kind])
    table = (model.net.word_embedding if kind == "joint-bilstm-crf" else model.net.embedding).weight
    rows = model.vocab.token_ids(rare_words(data.train), strict=True)
    assert torch.equal(table[UNK_ID], table[rows].mean(dim=0))
    assert model.vocab.untrained and all(
        torch.equal(table[i], table[UNK_ID]) for i in model.vocab.token_ids(model.vocab.untrained, strict=True))


@pytest.mark.parametrize("kind", sorted(TINY))
def test_setting_the_unk_row_changes_no_other_weight(kind, data, monkeypatch):
    """The <unk> row is set from the rare words at each validation pass and after training; no training batch
    reads it, so every other weight (what the model memorised) is bitwise that of a run that never sets it."""
    from pytest_privleak.targets import unk_training

    config = dict(TINY[kind], epochs=3)
    model = train_target(kind, data, seed=0, progress=False, **config)
    monkeypatch.setattr(MODULES[kind], "set_unk_row", lambda weight, rows: None)
    monkeypatch.setattr(unk_training, "set_unk_row_from_rare_words", lambda *args, **kwargs: ())
    untouched = train_target(kind, data, seed=0, progress=False, **config)
    table = "word_embedding.weight" if kind == "joint-bilstm-crf" else "embedding.weight"
    ours, theirs = model.net.state_dict(), untouched.net.state_dict()
    assert ours.keys() == theirs.keys()
    for key in ours:
        if key == table:
            others = torch.arange(ours[key].shape[0]) != UNK_ID
            assert not torch.equal(ours[key][UNK_ID], theirs[key][UNK_ID])
            # the untrained reserved tokens are tied to <unk>, so compare the trained rows
            trained = others.clone()
            trained[model.vocab.token_ids(model.vocab.untrained, strict=True)] = False
            assert torch.equal(ours[key][trained], theirs[key][trained]), kind
        else:
            assert torch.equal(ours[key], theirs[key]), (kind, key)
