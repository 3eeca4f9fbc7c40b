"""The joint intent + slot target (canary-extraction-nlu §4.1): protocols, losses, defences, errors."""

import numpy as np
import pytest
import torch

from pytest_privleak.canaries import canary, inject_canaries
from pytest_privleak.data.synthetic import generate_snips_like
from pytest_privleak.data.types import Utterance
from pytest_privleak.protocols import SequenceScorer, SoftInputModel
from pytest_privleak.targets import KINDS, train_target
from pytest_privleak.targets import training
from pytest_privleak.targets.joint_nlu import (JointNLUConfig, JointNLUNet, batch_loss, char_width, collate,
                                               encode_utterances)
from pytest_privleak.targets.vocab import UNK_ID, OutOfVocabularyError

TINY = dict(epochs=2, batch_size=16, embedding_dim=8, hidden_dim=8, char_dim=4, char_filters=6)
#: Losses here are float32 sums near 10-40 (one float32 step there: 1-4e-6) computed in different orders
#: (packed vs unpacked LSTM, other batch shapes); the CRF NLL is a difference of log-partitions near 50,
#: so a few steps of those can remain in absolute terms: about 10 steps relative plus 5 steps at 50.
LOSS_TOL = dict(rtol=1e-5, atol=2e-5)


@pytest.fixture(scope="module")
def pin():
    return canary("pin", 4, seed=3)


@pytest.fixture(scope="module")
def data(pin):
    return inject_canaries(generate_snips_like(n_train=80, n_valid=20, n_test=30, seed=1), pin, repeats=10)


@pytest.fixture(scope="module", params=[False, True], ids=["words", "chars"])
def model(request, data):
    return train_target("joint-bilstm-crf", data, seed=0, progress=False, char_embeddings=request.param,
                        dropout=0.2, **TINY)


def test_implements_both_protocols(model):
    assert isinstance(model, SoftInputModel)
    assert isinstance(model, SequenceScorer)


def test_input_embeddings_has_one_row_per_vocabulary_token(model):
    W = model.input_embeddings()
    char_part = TINY["char_filters"] if model.config.char_embeddings else 0
    assert W.shape == (len(model.vocabulary), TINY["embedding_dim"] + char_part)
    assert W.device == model.device and not W.requires_grad
    assert model.vocabulary[:2] == ["<pad>", "<unk>"]


def test_rows_of_W_are_what_the_network_reads(model, pin):
    ids = torch.tensor([model.token_ids(pin.tokens)])
    assert torch.equal(model.input_embeddings()[ids], model.net.embed(ids))


def test_loss_from_one_hot_embeddings_equals_the_training_loss(model, pin, data):
    """eq. 2 with a one-hot a gives W[ids]; its loss must be the model's own loss on those ids."""
    same_length = [u for u in data.train if len(u.tokens) == len(pin.tokens)][:5] + [pin.utterance]
    ids = torch.tensor([model.token_ids(u.tokens) for u in same_length])
    W = model.input_embeddings()
    soft = model.loss_from_embeddings(W[ids], [u.intent for u in same_length], [u.tags for u in same_length])
    own = batch_loss(model.net, collate(encode_utterances(model.vocab, same_length), model.device))
    assert soft.shape == (len(same_length),)
    torch.testing.assert_close(soft, own, **LOSS_TOL)
    np.testing.assert_allclose(model.score(same_length), own.numpy(), **LOSS_TOL)


def test_loss_from_embeddings_is_differentiable_wrt_inputs_only(model, pin):
    W = model.input_embeddings()
    logits = torch.zeros(3, len(pin.tokens), len(W), requires_grad=True)
    soft = torch.softmax(logits, -1) @ W                  # eq. 2: W^T a
    loss = model.loss_from_embeddings(soft, pin.intent, pin.tags)  # one intent/tags shared by all rows
    loss.sum().backward()
    assert logits.grad is not None and logits.grad.abs().sum() > 0
    assert all(not p.requires_grad for p in model.net.parameters())
    assert not model.net.training


def test_loss_from_embeddings_checks_its_arguments(model, pin):
    W = model.input_embeddings()
    x = W[torch.tensor([model.token_ids(pin.tokens)])]
    with pytest.raises(ValueError, match=r"embeddings must be \[B, L,"):
        model.loss_from_embeddings(x[0], pin.intent, pin.tags)
    with pytest.raises(ValueError, match="tags\\[0\\] has 3 tags"):
        model.loss_from_embeddings(x, [pin.intent], [pin.tags[:3]])
    with pytest.raises(ValueError, match="2 intents"):
        model.loss_from_embeddings(x, [pin.intent, pin.intent], [pin.tags])
    with pytest.raises(ValueError, match="intent 'Nope'"):
        model.loss_from_embeddings(x, "Nope", pin.tags)


def test_score_token_ids_matches_score_of_the_same_utterances(model, pin):
    """The fast path for same-length candidates with shared labels equals the general scorer."""
    generator = torch.Generator().manual_seed(0)
    free = torch.randint(2, len(model.vocabulary), (100, 2), generator=generator)  # 2 free slots, any token
    fixed = torch.tensor(model.token_ids(pin.tokens[:-2])).expand(100, -1)
    ids = torch.cat([fixed, free], dim=1)
    fast = model.score_token_ids(ids, pin.intent, pin.tags)
    utterances = [Utterance([model.vocabulary[i] for i in row], pin.tags, pin.intent) for row in ids.tolist()]
    assert fast.shape == (100,)
    np.testing.assert_allclose(fast.numpy(), model.score(utterances), **LOSS_TOL)


def test_score_pads_mixed_lengths_without_changing_any_loss(model, data):
    """Length-grouped scoring and packed (padded) training batches give each utterance its own loss."""
    utterances = list(data.test[:12])
    assert len({len(u.tokens) for u in utterances}) > 1
    alone = np.array([model.score([u])[0] for u in utterances])
    np.testing.assert_allclose(model.score(utterances), alone, **LOSS_TOL)
    encoded = encode_utterances(model.vocab, utterances, char_width(model.config))
    padded = batch_loss(model.net, collate(encoded, model.device))
    np.testing.assert_allclose(padded.numpy(), alone, **LOSS_TOL)


def test_score_maps_unknown_tokens_to_unk_but_token_ids_is_strict(model):
    utterance = Utterance(("play", "zzzunseen"), ("O", "O"), "PlayMusic")
    assert np.isfinite(model.score([utterance])).all()
    with pytest.raises(OutOfVocabularyError, match=r"'zzzunseen'.*extra_tokens=\['zzzunseen'"):
        model.token_ids(utterance.tokens)
    assert model.token_ids(utterance.tokens, strict=False)[1] == 1


def test_evaluate_reports_accuracies(model, data):
    figures = model.evaluate(data.test)
    assert set(figures) == {"intent_accuracy", "slot_accuracy", "n"}
    assert 0.0 <= figures["intent_accuracy"] <= 1.0 and 0.0 <= figures["slot_accuracy"] <= 1.0
    assert figures["n"] == len(data.test)


def test_history_and_facts(model):
    assert [row["epoch"] for row in model.history] == [1, 2]
    assert model.stopped_epoch == 2 and 1 <= model.best_epoch <= 2
    assert all(row["valid_loss"] is not None for row in model.history)
    assert model.loaded_from_cache is False and len(model.content_hash) == 64
    facts = model.describe()
    assert facts["config"]["dropout"] == 0.2 and facts["device"] == "cpu"


def test_a_synthetic_model_learns_its_task():
    """A sanity floor: the default model on a small Snips-like corpus tags and classifies well."""
    data = generate_snips_like(n_train=400, n_valid=50, n_test=200, seed=2)
    model = train_target("joint-bilstm-crf", data, seed=0, progress=False)
    figures = model.evaluate(data.test)
    assert figures["intent_accuracy"] > 0.95
    assert figures["slot_accuracy"] > 0.9


def test_progress_prints_one_line_per_epoch(data, capsys):
    train_target("joint-bilstm-crf", data, seed=0, progress=True, **TINY)
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("[privleak]")]
    assert len(lines) == TINY["epochs"]
    assert "epoch 1/2" in lines[0] and "valid" in lines[0]


def test_registry_lists_the_kinds():
    assert KINDS["joint-bilstm-crf"] == "pytest_privleak.targets.joint_nlu:train"
    assert {"lstm-lm", "ner-bilstm-crf"} <= set(KINDS)


def test_unknown_kind_lists_the_known_ones(data):
    with pytest.raises(ValueError, match="unknown target kind 'bert'.*joint-bilstm-crf"):
        train_target("bert", data)


def test_unknown_config_key_is_named_with_the_accepted_ones(data):
    with pytest.raises(TypeError, match=r"unknown config key\(s\) \['dropuot'\].*dropout"):
        train_target("joint-bilstm-crf", data, dropuot=0.2)


@pytest.mark.parametrize("key, value, message", [
    ("dropout", 1.0, "dropout=1.0 must be a number in"),
    ("epochs", 0, "epochs=0 must be an integer > 0"),
    ("lr", -1.0, "lr=-1.0"),
    ("early_stopping", "yes", "early_stopping='yes' must be True or False"),
    ("char_kernel", 4, "must be odd"),
])
def test_bad_config_values_are_named(key, value, message):
    with pytest.raises(ValueError, match=message):
        JointNLUConfig(**{key: value})


def test_early_stopping_needs_a_validation_split():
    data = generate_snips_like(n_train=20, n_valid=0, n_test=0)
    with pytest.raises(ValueError, match="needs a validation split"):
        train_target("joint-bilstm-crf", data, progress=False, early_stopping=True, **TINY)


def test_unseen_words_get_the_character_features_of_their_own_letters(model):
    """Issue 12: with CE an unseen word got the character vector of '<unk>', not of its letters (§6, CE)."""
    a = Utterance(("play", "zzzunseen"), ("O", "O"), "PlayMusic")
    b = Utterance(("play", "qqqother"), ("O", "O"), "PlayMusic")
    chars = encode_utterances(model.vocab, [a, b], char_width(model.config))
    batch = collate(chars, model.device)
    x = model.net.embed(batch.ids, batch.chars)
    assert torch.equal(x[0, 1, :TINY["embedding_dim"]], x[1, 1, :TINY["embedding_dim"]])  # both read <unk>
    score_a, score_b = model.score([a, b])
    if model.config.char_embeddings:
        assert not torch.equal(x[0, 1], x[1, 1]) and score_a != score_b
    else:
        assert score_a == score_b


def test_vocabulary_words_read_their_own_letters_through_W(model, pin):
    """SoftInputModel rows (word vector + CNN of the word's own characters) equal what scoring reads."""
    batch = collate(encode_utterances(model.vocab, [pin.utterance], char_width(model.config)), model.device)
    assert torch.equal(model.net.embed(batch.ids, batch.chars), model.input_embeddings()[batch.ids])


def test_a_v0_token_the_corpus_never_says_is_attackable():
    """Issue 12: generate_snips_like(n_train=200) never says '7'; the pin's V0 must still have a row."""
    from pytest_privleak.attacks.cea.attack import extract

    base = generate_snips_like(n_train=200, n_valid=20, n_test=10, seed=0)
    assert "7" not in base.vocabulary
    pin = canary("pin", secret="1 2")                 # V0 = ten digits, '7' among them; 10^2 secrets keep it fast
    model = train_target("joint-bilstm-crf", inject_canaries(base, pin, repeats=10), seed=0, progress=False,
                         **TINY)
    report = extract(model, pin, method="exhaustive")
    assert report.space_sizes == (10 ** 2,) and 1 <= report.ranks[0] <= 10 ** 2
    seven = model.token_ids(["7"])[0]
    W = model.input_embeddings()
    assert torch.equal(W[seven], W[UNK_ID])           # never trained: the network reads <unk> for it


@pytest.mark.parametrize("unk_alpha", [0.25, 0.0])
def test_the_unk_row_is_set_from_rare_words_or_trained_by_word_dropout(data, unk_alpha):
    """Issue 12: with every training token in the vocabulary the <unk> row stayed at its initial value.
    Issue 21: without word dropout (the default) it is the mean of the rarest training words' rows, set after
    training; with word dropout (a defence) it is trained, and kept."""
    from pytest_privleak.targets.unk_training import rare_words

    config = dict(TINY, unk_alpha=unk_alpha)
    model = train_target("joint-bilstm-crf", data, seed=0, progress=False, **config)
    with training.seeded(0):
        initial = JointNLUNet(model.vocab, JointNLUConfig(**config)).word_embedding.weight[UNK_ID]
    table = model.net.word_embedding.weight
    assert not torch.equal(table[UNK_ID], initial)
    rare = model.vocab.token_ids(rare_words(data.train), strict=True)
    assert len(rare) >= 1 and torch.equal(table[UNK_ID], table[rare].mean(dim=0)) is (unk_alpha == 0.0)
