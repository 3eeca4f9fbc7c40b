"""Every built-in kind: reserved canary tokens and extra_tokens in the vocabulary, an <unk> row set from the
rare words, untrained tokens read as <unk>, and the config round trip through the cache (issues 12, 21)."""
import numpy as np
import pytest
import torch

from pytest_privleak.cache.targets import TargetCache
from pytest_privleak.canaries import PATTERNS, canary, inject_canaries
from pytest_privleak.data.synthetic import generate_snips_like
from pytest_privleak.data.types import Utterance
from pytest_privleak.targets import train_target, training
from pytest_privleak.targets.vocab import UNK_ID

TINY = {
    "joint-bilstm-crf": dict(epochs=2, batch_size=16, embedding_dim=8, hidden_dim=8),
    "lstm-lm": dict(epochs=2, batch_size=16, embedding_dim=8, hidden_dim=16),
    "ner-bilstm-crf": dict(epochs=2, batch_size=16, embedding_dim=8, hidden_dim=8),
}
BUILT_IN = sorted(TINY)  # the recurrent kinds of this package (not the transformer kinds)
NETS = {"joint-bilstm-crf": "word_embedding", "lstm-lm": "embedding", "ner-bilstm-crf": "embedding"}


@pytest.fixture(scope="module")
def data():
    """snips_like at n_train=200, seed 0 never says '7' (the issue's case); a pin without 7 is injected."""
    base = generate_snips_like(n_train=200, n_valid=20, n_test=10, seed=0)
    assert "7" not in base.vocabulary
    return inject_canaries(base, canary("pin", secret="1 2 3 4"), repeats=10)


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return TargetCache(tmp_path_factory.mktemp("reserved-cache"))


@pytest.fixture(scope="module", params=BUILT_IN)
def kind_model(request, data, cache):
    kind = request.param
    return kind, train_target(kind, data, cache=cache, seed=0, progress=False, extra_tokens=["zulu", "yankee"],
                              **TINY[kind])


def _table(kind, model) -> torch.Tensor:
    return getattr(model.net, NETS[kind]).weight


def test_every_kind_holds_builtin_patterns_and_extra_tokens(kind_model):
    kind, model = kind_model
    wanted = {t for p in PATTERNS.values() for t in (*p.prefix, *p.vocabulary)} | {"zulu", "yankee"}
    assert wanted <= set(model.vocab.tokens), kind
    assert model.config.extra_tokens == ("yankee", "zulu")


def test_untrained_rows_are_the_trained_unk_row(kind_model):
    kind, model = kind_model
    table = _table(kind, model)
    for token in ("7", "zulu", "mauve"):
        row = model.vocab.token_ids([token], strict=True)[0]
        assert row != UNK_ID and torch.equal(table[row], table[UNK_ID]), (kind, token)


def test_the_default_unk_row_is_the_mean_of_the_rare_training_words(kind_model, data):
    """Issue 21: the default has no word dropout, so nothing trains <unk>; after training its row is the mean
    of the rarest training words' rows (unk_training.set_unk_row_from_rare_words), not the random initial one."""
    from pytest_privleak.targets.unk_training import rare_words

    kind, model = kind_model
    assert model.config.unk_alpha == 0.0, kind
    table = _table(kind, model)
    words = rare_words(data.train)
    assert 1 <= len(words) < len(model.vocab.tokens) - len(model.vocab.untrained) - 2
    rows = model.vocab.token_ids(words, strict=True)
    assert torch.equal(table[UNK_ID], table[rows].mean(dim=0)), kind


def test_extra_tokens_survive_the_cache_and_change_the_key(kind_model, data, cache):
    kind, model = kind_model
    again = train_target(kind, data, cache=cache, seed=0, progress=False, extra_tokens=("yankee", "zulu", "zulu"),
                         **TINY[kind])
    assert again.loaded_from_cache and again.content_hash == model.content_hash
    assert again.config == model.config and again.vocab == model.vocab
    other = training.cache_key(kind, data, type(model.config)(**TINY[kind]), 0, "cpu")
    assert other != model.content_hash


def test_lm_fast_path_reads_unk_for_untrained_tokens_like_score(data):
    model = train_target("lstm-lm", data, seed=0, progress=False, **TINY["lstm-lm"])
    tokens = ("my", "pin", "code", "is", "7", "7", "1", "2")
    ids = torch.tensor([model.vocab.token_ids(tokens, strict=True)])
    utterance = Utterance(tokens, ("O",) * 8, "PinIntent")
    np.testing.assert_allclose(model.score_token_ids(ids).numpy(), model.score([utterance]), rtol=1e-5)


def test_word_dropout_probability_is_alpha_over_alpha_plus_count():
    """Kiperwasser & Goldberg (2016): p(w) = alpha / (alpha + #(w)); by hand for counts 1, 2 and 4."""
    from pytest_privleak.data.types import NLUDataset
    from pytest_privleak.targets.unk_training import unk_probabilities
    from pytest_privleak.targets.vocab import Vocabulary

    train = (Utterance(("a", "b", "c"), ("O",) * 3, "I"), Utterance(("b", "c"), ("O",) * 2, "I"),
             Utterance(("c", "c"), ("O",) * 2, "I"))
    vocab = Vocabulary.from_dataset(NLUDataset(train, (), ()))
    probs = unk_probabilities(vocab, train, 0.25)
    got = {t: float(probs[vocab.token_ids([t], strict=True)[0]]) for t in ("a", "b", "c", "7")}
    assert got == pytest.approx({"a": 0.25 / 1.25, "b": 0.25 / 2.25, "c": 0.25 / 4.25, "7": 0.0}, rel=1e-6)
    assert float(probs[UNK_ID]) == 0.0 and not unk_probabilities(vocab, train, 0.0).any()


def test_word_dropout_reads_unk_on_a_corpus_without_singletons():
    """The bundled realistic corpus has no token seen once, so Lample's singleton rule (the code before this
    change) never fed <unk> there; word dropout feeds it about sum_w alpha #(w) / (alpha + #(w)) times an epoch.

    That a fed <unk> row is trained: test_the_unk_row_is_set_from_rare_words_or_trained_by_word_dropout
    (test_targets_joint_nlu.py).
    """
    from collections import Counter

    from pytest_privleak.targets.unk_training import drop_to_unk, unk_probabilities
    from pytest_privleak.targets.vocab import Vocabulary

    data = generate_snips_like(n_train=1500, n_valid=20, n_test=0, seed=0, unseen_share=0.5)
    counts = Counter(t for u in data.train for t in u.tokens)
    assert min(counts.values()) > 1                                   # no singleton at all
    vocab = Vocabulary.from_dataset(data)
    probs = unk_probabilities(vocab, data.train, 0.25)
    expected = sum(0.25 * n / (0.25 + n) for n in counts.values())  # <unk> reads per epoch, in expectation
    ids = torch.tensor([i for u in data.train for i in vocab.token_ids(u.tokens)])
    torch.manual_seed(0)
    fed = torch.stack([(drop_to_unk(ids, probs) == UNK_ID).sum() for _ in range(20)]).double()
    assert expected > 60
    # 20 epochs' counts: mean within 4 standard errors of the expectation (a sum of Bernoullis: var <= mean)
    assert abs(float(fed.mean()) - expected) < 4 * (expected / 20) ** 0.5
