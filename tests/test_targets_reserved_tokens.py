"""Every built-in kind: reserved canary tokens and extra_tokens in the vocabulary, a trained <unk> row,
untrained tokens read as <unk>, and the config round trip through the cache (issue 12)."""
import numpy as np
import pytest
import torch

from pytest_privleak.cache import TargetCache
from pytest_privleak.canaries import PATTERNS, canary, inject_canaries
from pytest_privleak.data.synthetic import generate_snips_like
from pytest_privleak.data.types import Utterance
from pytest_privleak.targets import KINDS, train_target, training
from pytest_privleak.targets.vocab import UNK_ID

TINY = {
    "joint-bilstm-crf": dict(epochs=2, batch_size=16, embedding_dim=8, hidden_dim=8),
    "lstm-lm": dict(epochs=2, batch_size=16, embedding_dim=8, hidden_dim=16),
    "ner-bilstm-crf": dict(epochs=2, batch_size=16, embedding_dim=8, hidden_dim=8),
}
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


@pytest.fixture(scope="module", params=sorted(KINDS))
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


def test_the_unk_row_moved_away_from_its_initial_value(kind_model, data):
    kind, model = kind_model
    fresh = train_target(kind, data, seed=0, progress=False, extra_tokens=["zulu", "yankee"], epochs=1,
                         singleton_unk=0.0, **{k: v for k, v in TINY[kind].items() if k != "epochs"})
    # singleton_unk=0 never feeds <unk> in training: its row is the seeded initial one, which the default moves
    assert not torch.equal(_table(kind, model)[UNK_ID], _table(kind, fresh)[UNK_ID]), kind


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
