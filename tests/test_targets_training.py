"""The shared training loop: determinism, early stopping with best-weight restore, config checks."""

import pytest
import torch
from torch import nn

from pytest_privleak.data.synthetic import generate_snips_like
from helpers_training_data import noisy_intents
from pytest_privleak.targets import train_target
from pytest_privleak.targets.joint_nlu import batch_loss, collate, encode_utterances
from pytest_privleak.targets.training import _mean_loss, fit, make_config, seeded, torch_threads

TINY = dict(epochs=3, batch_size=16, embedding_dim=8, hidden_dim=8, char_dim=4, char_filters=6)


class Scalar(nn.Module):
    """One weight ``w``: the training loss ``-w`` has a constant gradient, so each Adam step adds
    exactly ``lr`` to ``w``; the validation loss ``(w - 0.3)^2`` is lowest at 0.3."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.zeros(()))

    def loss(self, batch) -> torch.Tensor:
        loss = -self.w if self.training else (self.w - 0.3) ** 2
        return loss.expand(len(batch))


def test_early_stopping_stops_after_patience_and_restores_the_best_weights():
    model = Scalar()
    history = fit(model, lambda m, b: m.loss(b), [0, 0], [0], list, epochs=100, batch_size=2, lr=0.05, seed=0,
                  early_stopping=True, patience=3, progress=False)
    ws = [0.05 * k for k in range(1, 101)]               # w after epoch k (one step per epoch)
    best = min(range(100), key=lambda k: (ws[k] - 0.3) ** 2) + 1
    assert history.stopped_early
    assert history.best_epoch == best == 6
    assert history.stopped_epoch == best + 3
    assert float(model.w.detach()) == pytest.approx(ws[best - 1], abs=1e-3)   # the best epoch's weight, not the last
    valid = [row["valid_loss"] for row in history.epochs]
    assert min(valid) == valid[best - 1]
    assert not model.training


def test_without_early_stopping_the_last_weights_are_kept():
    model = Scalar()
    history = fit(model, lambda m, b: m.loss(b), [0, 0], [0], list, epochs=12, batch_size=2, lr=0.05, seed=0,
                  progress=False)
    assert history.stopped_epoch == 12 and not history.stopped_early
    assert float(model.w.detach()) == pytest.approx(0.6, abs=1e-3)
    assert history.best_epoch == 6                       # recorded even when not stopping early


def test_joint_model_stops_early_on_noisy_labels():
    """Random intents: the model overfits the train split and the validation loss turns."""
    data = noisy_intents()
    model = train_target("joint-bilstm-crf", data, progress=False, early_stopping=True, patience=3, epochs=60,
                         batch_size=16, embedding_dim=32, hidden_dim=32, lr=1e-2)
    assert model.stopped_early and model.stopped_epoch < 60
    assert model.stopped_epoch == model.best_epoch + 3
    best = model.history[model.best_epoch - 1]["valid_loss"]
    assert best == min(row["valid_loss"] for row in model.history)
    restored = _mean_loss(model.net, batch_loss, [collate(encode_utterances(model.vocab, data.valid), model.device)])
    assert restored == pytest.approx(best, rel=1e-6)


@pytest.mark.parametrize("char_embeddings", [False, True])
def test_same_seed_gives_bitwise_identical_weights(char_embeddings):
    data = generate_snips_like(n_train=50, n_valid=10, n_test=0, seed=3)
    runs = [train_target("joint-bilstm-crf", data, seed=7, progress=False, dropout=0.2,
                         char_embeddings=char_embeddings, **TINY) for _ in range(2)]
    other = train_target("joint-bilstm-crf", data, seed=8, progress=False, dropout=0.2,
                         char_embeddings=char_embeddings, **TINY)
    first, second = (r.net.state_dict() for r in runs)
    assert first.keys() == second.keys()
    assert all(torch.equal(first[k], second[k]) for k in first)
    assert runs[0].history[-1]["train_loss"] == runs[1].history[-1]["train_loss"]
    assert not torch.equal(first["word_embedding.weight"], other.net.state_dict()["word_embedding.weight"])


def test_training_leaves_the_callers_rng_and_threads_alone():
    torch.manual_seed(123)
    expected = torch.rand(3)
    threads = torch.get_num_threads()
    torch.manual_seed(123)
    data = generate_snips_like(n_train=20, n_valid=5, n_test=0)
    model = train_target("joint-bilstm-crf", data, progress=False, **TINY)
    model.score(data.valid)
    model.evaluate(data.valid)
    assert torch.equal(torch.rand(3), expected)
    assert torch.get_num_threads() == threads


def test_seeded_and_torch_threads_restore_state():
    before = torch.random.get_rng_state()
    with seeded(5):
        a = torch.rand(2)
    with seeded(5):
        b = torch.rand(2)
    assert torch.equal(a, b) and torch.equal(torch.random.get_rng_state(), before)
    threads = torch.get_num_threads()
    with torch_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == threads
    with pytest.raises(ValueError, match="threads=0"):
        with torch_threads(0):
            pass


def test_make_config_names_unknown_keys():
    from pytest_privleak.targets.joint_nlu import JointNLUConfig

    with pytest.raises(TypeError, match=r"train_target\('k', \.\.\.\) got unknown config key\(s\) \['a', 'b'\]"):
        make_config(JointNLUConfig, {"b": 1, "a": 2, "epochs": 3}, kind="k")
    assert make_config(JointNLUConfig, {"epochs": 3}, kind="k").epochs == 3


def test_empty_train_split_is_rejected():
    with pytest.raises(ValueError, match="empty training split"):
        fit(Scalar(), lambda m, b: m.loss(b), [], [], list, epochs=1, batch_size=1, lr=0.1, seed=0, progress=False)
