"""Seeds trained together (issue 35): k models stacked on a model axis, each exactly the model trained alone."""


import pytest
import torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
from torchcrf import CRF

from helpers_training_data import noisy_intents, small_ner, snips_with_pin
from pytest_privleak.targets import train_target, train_targets
from pytest_privleak.targets import joint_nlu
from pytest_privleak.targets.seeds import train_target_seeds
from pytest_privleak.targets.stacked import crf as stacked_crf
from pytest_privleak.targets.stacked.lstm import lstm, reverse_index
from pytest_privleak.targets.lstm_lm import LSTMLMConfig, LSTMLMNet
from pytest_privleak.targets.stacked.params import stack_parameters
from pytest_privleak.targets.stacked.plan import padded_rows, stack_groups
from pytest_privleak.targets.vocab import Vocabulary
from pytest_privleak.cache.targets import TargetCache

TINY = dict(epochs=3, batch_size=16, embedding_dim=8, hidden_dim=8)


@pytest.fixture(scope="module")
def data():
    return snips_with_pin()


@pytest.fixture(scope="module")
def ner_data():
    return small_ner()


def weights(model) -> dict:
    return {name: tensor.clone() for name, tensor in model.net.state_dict().items()}


def same_bits(a: dict, b: dict) -> list[str]:
    """Names of the tensors that differ in any bit."""
    return [name for name in a if not torch.equal(a[name], b[name])]


CONFIGS = {
    "joint, dropout, chars, word dropout": ("joint-bilstm-crf", dict(dropout=0.2, char_embeddings=True, char_dim=4,
                                                                           char_filters=6, unk_alpha=0.25)),
    "joint, odd sizes": ("joint-bilstm-crf", dict(embedding_dim=5, hidden_dim=7, batch_size=13)),
    "lm, 2 layers, dropout, word dropout": ("lstm-lm", dict(num_layers=2, dropout=0.3, unk_alpha=0.25)),
    "lm, last batch of one": ("lstm-lm", dict(embedding_dim=5, hidden_dim=7, batch_size=37)),
    "tagger, SGD, lr decay, dropout 0.5": ("ner-bilstm-crf", dict(batch_size=10)),
    "tagger, Adam, word dropout": ("ner-bilstm-crf", dict(optimizer="adam", lr=5e-3, unk_alpha=0.25)),
}


@pytest.mark.parametrize("kind, config", CONFIGS.values(), ids=CONFIGS.keys())
def test_a_model_trained_among_seven_is_bitwise_the_model_trained_alone(data, ner_data, kind, config,
                                                                       one_torch_thread):
    """Model j's arithmetic never reads another model's rows: its weights do not depend on its stack."""
    cfg = {**TINY, **config}
    data = ner_data if kind == "ner-bilstm-crf" else data
    alone = train_targets(kind, [(data, 3)], progress=False, **cfg)[0]
    stacked = train_targets(kind, [(data, s) for s in range(7)], progress=False, **cfg)
    assert same_bits(weights(alone), weights(stacked[3])) == []
    assert [{**row, "seconds": 0} for row in alone.training_history.epochs] == [
        {**row, "seconds": 0} for row in stacked[3].training_history.epochs]
    assert len({tuple(float(v.sum()) for v in weights(m).values()) for m in stacked}) == 7   # seeds differ


def test_models_that_stop_early_leave_the_stack_and_the_others_go_on(one_torch_thread):
    """Random intents: each model overfits and stops at its own epoch, with its best weights restored."""
    data = noisy_intents()
    cfg = dict(early_stopping=True, patience=2, epochs=40, batch_size=16, embedding_dim=16, hidden_dim=16, lr=1e-2,
               dropout=0.1, unk_alpha=0.25)
    stacked = train_targets("joint-bilstm-crf", [(data, s) for s in range(4)], progress=False, **cfg)
    assert all(m.stopped_early and m.stopped_epoch == m.best_epoch + 2 for m in stacked)
    assert len({m.stopped_epoch for m in stacked}) > 1
    last = max(range(4), key=lambda j: stacked[j].stopped_epoch)
    alone = train_targets("joint-bilstm-crf", [(data, last)], progress=False, **cfg)[0]
    assert same_bits(weights(alone), weights(stacked[last])) == []
    restored = stacked_valid_loss(stacked[last], data)
    assert restored == pytest.approx(stacked[last].history[stacked[last].best_epoch - 1]["valid_loss"], rel=1e-6)


def stacked_valid_loss(model, data) -> float:
    """The model's mean validation loss as the training loop measured it (float64 sum of float32 losses)."""
    items = joint_nlu.encode_utterances(model.vocab, data.valid, joint_nlu.char_width(model.config))
    batch = joint_nlu.collate(items, model.device)
    with torch.no_grad():
        return float(joint_nlu.batch_loss(model.net, batch).double().mean())


def test_the_same_stack_twice_gives_the_same_bits(data, one_torch_thread):
    cfg = {**TINY, "dropout": 0.2}
    first = train_targets("joint-bilstm-crf", [(data, s) for s in range(3)], progress=False, **cfg)
    second = train_targets("joint-bilstm-crf", [(data, s) for s in range(3)], progress=False, **cfg)
    assert all(same_bits(weights(a), weights(b)) == [] for a, b in zip(first, second))


def test_seeds_train_together_and_each_is_cached_under_its_own_key(data, tmp_path, one_torch_thread):
    cache = TargetCache(tmp_path)
    models = train_target_seeds("joint-bilstm-crf", data, seeds=3, seed=0, cache=cache, progress=False, **TINY)
    assert [m.seed for m in models] == [0, 1, 2] and not any(m.loaded_from_cache for m in models)
    one = train_target("joint-bilstm-crf", data, seed=1, cache=cache, progress=False, **TINY)
    assert one.loaded_from_cache and one.content_hash == models[1].content_hash
    assert same_bits(weights(one), weights(models[1])) == []
    more = train_target_seeds("joint-bilstm-crf", data, seeds=4, seed=0, cache=cache, progress=False, **TINY)
    assert [m.loaded_from_cache for m in more] == [True, True, True, False]
    alone = train_target("joint-bilstm-crf", data, seed=3, progress=False, **TINY)
    assert same_bits(weights(alone), weights(more[3])) == []


def test_stacked_crf_is_pytorch_crf_per_model():
    """The log-likelihood of k stacked CRFs (matrix-product forward algorithm) against torchcrf, model by model."""
    torch.manual_seed(0)
    k, batch, width, n_tags = 3, 5, 6, 7
    crfs = [CRF(n_tags, batch_first=True) for _ in range(k)]
    for c in crfs:  # transitions of trained size, some strongly forbidden
        torch.nn.init.normal_(c.transitions, std=4.0)
    params = {f"crf.{name}": p for name, p in stack_parameters(crfs).items()}
    emissions = (torch.randn(k, batch, width, n_tags) * 5).requires_grad_(True)
    tags = torch.randint(n_tags, (k, batch, width))
    lengths = torch.tensor([[6, 1, 3, 6, 2]] * k)
    mask = torch.arange(width) < lengths.unsqueeze(-1)
    got = stacked_crf.log_likelihood(params, "crf.", emissions, tags, mask)
    want = torch.stack([c(emissions[j], tags[j], mask=mask[j], reduction="none") for j, c in enumerate(crfs)])
    # float32 sums of about 100 nats in different orders: a few float32 steps there (7.6e-6 each)
    torch.testing.assert_close(got, want, rtol=1e-6, atol=5e-5)
    got.sum().backward()
    grads = torch.stack([t.grad for t in (params["crf.transitions"],)]).clone()
    for c in crfs:
        c.zero_grad()
    torch.stack([c(emissions[j].detach(), tags[j], mask=mask[j], reduction="none")
                 for j, c in enumerate(crfs)]).sum().backward()
    torch.testing.assert_close(grads[0], torch.stack([c.transitions.grad for c in crfs]), rtol=1e-5, atol=1e-5)


def test_stacked_lstm_is_nn_lstm_per_model():
    """Two bidirectional layers over rows of different lengths against packed ``nn.LSTM``, model by model."""
    torch.manual_seed(1)
    k, batch, width, dim, hidden = 2, 4, 5, 3, 6
    nets = [torch.nn.LSTM(dim, hidden, num_layers=2, bidirectional=True, batch_first=True) for _ in range(k)]
    params = {f"lstm.{name}": p for name, p in stack_parameters(nets).items()}
    x = torch.randn(k, batch, width, dim)
    lengths = torch.tensor([[5, 2, 4, 1], [3, 5, 1, 2]])
    mask = torch.arange(width) < lengths.unsqueeze(-1)
    got = lstm(params, "lstm.", x, mask, num_layers=2, bidirectional=True, reverse=reverse_index(lengths, width))
    for j, net in enumerate(nets):
        packed = pack_padded_sequence(x[j], lengths[j], batch_first=True, enforce_sorted=False)
        want, _ = pad_packed_sequence(net(packed)[0], batch_first=True, total_length=width)
        torch.testing.assert_close(got[j], want, rtol=1e-5, atol=1e-6)


def test_models_of_different_vocabularies_stack_with_padded_rows_and_equal_the_models_trained_alone(
        data, one_torch_thread):
    """References train on different halves: their vocabularies differ, and they stack when they pad alike."""
    halves = [data.replace(train=data.train[:40], name="a"), data.replace(train=data.train[35:], name="b")]
    sizes = [len(Vocabulary.from_dataset(d).tokens) for d in halves]
    assert sizes[0] != sizes[1] and padded_rows(sizes[0] + 1) == padded_rows(sizes[1] + 1)
    nets = [LSTMLMNet(n, LSTMLMConfig(**TINY)) for n in sizes]
    assert stack_groups(nets, [(40, 14)] * 2, ("embedding.weight", "output.weight", "output.bias")) == [[0, 1]]
    cfg = {**TINY, "dropout": 0.2, "unk_alpha": 0.25}
    together = train_targets("lstm-lm", [(halves[0], 1), (halves[1], 2)], progress=False, **cfg)
    for (dataset, seed), model in zip([(halves[0], 1), (halves[1], 2)], together):
        alone = train_targets("lstm-lm", [(dataset, seed)], progress=False, **cfg)[0]
        assert same_bits(weights(alone), weights(model)) == []


def test_stack_groups_pad_vocabulary_rows_to_a_bucket_and_keep_other_shapes_apart():
    def net(rows: int, hidden: int = 4) -> torch.nn.Module:
        module = torch.nn.Module()
        module.table = torch.nn.Embedding(rows, 3)
        module.head = torch.nn.Linear(hidden, 2)
        return module

    nets = [net(100), net(120), net(130), net(100, hidden=5), net(64)]
    assert [padded_rows(n) for n in (1, 64, 65, 130)] == [64, 64, 128, 192]
    assert stack_groups(nets, [0] * 5, ("table.weight",)) == [[0, 1], [2], [3], [4]]
    assert stack_groups(nets[:2], [0, 1], ("table.weight",)) == [[0], [1]]       # other batch shapes: apart
