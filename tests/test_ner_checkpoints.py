"""The paper's tagger by default, and figures per epoch from one training (issue 27 items 3-4)."""
import pytest
import torch

from pytest_privleak.cache.targets import TargetCache
from pytest_privleak.data.synthetic_ner import generate_ner_like
from pytest_privleak.targets import train_target
from pytest_privleak.targets.ner_tagger import NERTaggerConfig

pytestmark = pytest.mark.usefixtures("one_torch_thread")
TINY = dict(embedding_dim=8, hidden_dim=8)


def test_defaults_are_the_papers_tagger():
    c = NERTaggerConfig()
    # d-exposure-discriminative §4.1 (BiLSTM, dropout 0.5, SGD, lr decay) with Targer's values; no word dropout
    assert (c.optimizer, c.lr, c.momentum, c.lr_decay, c.dropout, c.batch_size, c.grad_clip) == (
        "sgd", 0.01, 0.9, 0.05, 0.5, 10, 5.0)
    assert (c.embedding_dim, c.hidden_dim, c.epochs, c.unk_alpha, c.early_stopping) == (100, 100, 25, 0.0, False)


@pytest.fixture(scope="module")
def data():
    return generate_ner_like(n_train=40, n_valid=8, n_test=8, seed=7)


def same_weights(a, b) -> bool:
    sa, sb = a.net.state_dict(), b.net.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def test_a_checkpoint_is_the_training_stopped_at_that_epoch(data, tmp_path):
    cache = TargetCache(tmp_path)
    final = train_target("ner-bilstm-crf", data, cache=cache, seed=1, progress=False, epochs=3, checkpoints=[1, 2],
                         **TINY)
    assert final.stopped_epoch == 3 and sorted(final.checkpoints) == [1, 2]
    one = final.at_epoch(1)
    assert final.at_epoch(3) is final and one.stopped_epoch == 1 and one.config.epochs == 1
    assert len(one.history.epochs) == 1 and one.history.epochs[0] == final.history.epochs[0]
    assert set(one.entity_f1) == {"valid", "test"}
    # bitwise the weights of a separate training with epochs=1, and the same cache entry (one training)
    alone = train_target("ner-bilstm-crf", data, seed=1, progress=False, epochs=1, **TINY)
    assert same_weights(one, alone) and not same_weights(one, final)
    cached = train_target("ner-bilstm-crf", data, cache=cache, seed=1, progress=False, epochs=1, **TINY)
    assert cached.loaded_from_cache and cached.content_hash == one.content_hash and same_weights(cached, one)
    # asked again, every epoch comes from the cache, with its entity F1
    again = train_target("ner-bilstm-crf", data, cache=cache, seed=1, progress=False, epochs=3, checkpoints=[1, 2],
                         **TINY)
    assert again.loaded_from_cache and all(t.loaded_from_cache for t in again.checkpoints.values())
    assert again.at_epoch(2).entity_f1 == final.at_epoch(2).entity_f1 and same_weights(again.at_epoch(2),
                                                                                     final.at_epoch(2))


def test_sgd_with_lr_decay_trains_and_adam_stays_available(data):
    sgd = train_target("ner-bilstm-crf", data, seed=0, progress=False, epochs=2, **TINY)
    adam = train_target("ner-bilstm-crf", data, seed=0, progress=False, epochs=2, optimizer="adam", lr=5e-3,
                        lr_decay=0.0, **TINY)
    assert not same_weights(sgd, adam)
    no_decay = train_target("ner-bilstm-crf", data, seed=0, progress=False, epochs=2, lr_decay=0.0, **TINY)
    assert not same_weights(sgd, no_decay)


@pytest.mark.parametrize("kwargs, error, fragment", [
    (dict(epochs=2, checkpoints=[3]), ValueError, r"checkpoints \[3\] .* not epochs of this training"),
    (dict(epochs=2, checkpoints=[1], early_stopping=True), ValueError, "checkpoints need early_stopping=False"),
    (dict(epochs=2, checkpoints="1"), TypeError, "must be a list of epochs"),
    (dict(epochs=2, optimizer="rmsprop"), ValueError, "optimizer='rmsprop' must be one of"),
    (dict(epochs=2, momentum=1.0), ValueError, "momentum=1.0 must be below 1"),
    (dict(epochs=2, lr_decay=-0.1), ValueError, "lr_decay=-0.1 must be a number >= 0"),
])
def test_bad_checkpoint_and_optimiser_settings_are_named(data, kwargs, error, fragment):
    with pytest.raises(error, match=fragment):
        train_target("ner-bilstm-crf", data, seed=0, progress=False, **TINY, **kwargs)


def test_at_epoch_without_that_checkpoint_names_the_fix(data):
    model = train_target("ner-bilstm-crf", data, seed=0, progress=False, epochs=1, **TINY)
    with pytest.raises(ValueError, match=r"no checkpoint at epoch 5 .*checkpoints=\[5, ...\]"):
        model.at_epoch(5)
