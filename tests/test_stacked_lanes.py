"""A stack split into lanes trained at once in threads (issue 35): the same weights as one stack, in less time."""

import threading

import pytest
import torch

from helpers_training_data import noisy_intents, small_ner, snips_with_pin
from pytest_privleak.data.synthetic import generate_snips_like
from pytest_privleak.targets import parallel, train_targets
from pytest_privleak.targets.stacked import loop

TINY = dict(epochs=3, batch_size=16, embedding_dim=8, hidden_dim=8)

CONFIGS = {
    "joint, dropout, chars": ("joint-bilstm-crf", dict(dropout=0.2, char_embeddings=True, char_dim=4,
                                                        char_filters=6)),
    "joint, word dropout": ("joint-bilstm-crf", dict(unk_alpha=0.25, dropout=0.1)),
    "lm, 2 layers, dropout": ("lstm-lm", dict(num_layers=2, dropout=0.3)),
    "tagger, SGD, lr decay": ("ner-bilstm-crf", dict(batch_size=10)),
}


@pytest.fixture(scope="module")
def data():
    return snips_with_pin()


@pytest.fixture(scope="module")
def ner_data():
    return small_ner()


@pytest.fixture
def processes():
    """Set the trainings this process may run at once (what the plugin sets from --privleak-train-processes)."""
    previous = parallel.current()

    def set_to(count: int) -> None:
        parallel.configure(processes=count)

    yield set_to
    parallel.configure(previous.processes, previous.board)


def weights(model) -> dict:
    return {name: tensor.clone() for name, tensor in model.net.state_dict().items()}


def differing(a: list, b: list) -> list[tuple[int, str]]:
    return [(j, name) for j, (x, y) in enumerate(zip(a, b)) for name in x if not torch.equal(x[name], y[name])]


def epochs_of(model) -> list[dict]:
    return [{**row, "seconds": 0} for row in model.training_history.epochs]


@pytest.mark.parametrize("kind, config", CONFIGS.values(), ids=CONFIGS.keys())
def test_seven_seeds_in_three_lanes_are_bitwise_the_seeds_of_one_stack(data, ner_data, kind, config, processes,
                                                                       one_torch_thread):
    cfg = {**TINY, **config}
    data = ner_data if kind == "ner-bilstm-crf" else data
    processes(1)
    one = train_targets(kind, [(data, s) for s in range(7)], progress=False, **cfg)
    processes(3)
    lanes = train_targets(kind, [(data, s) for s in range(7)], progress=False, **cfg)
    assert differing([weights(m) for m in one], [weights(m) for m in lanes]) == []
    assert [epochs_of(m) for m in one] == [epochs_of(m) for m in lanes]


def test_lanes_stop_early_on_their_own_and_keep_each_models_best_weights(processes, one_torch_thread):
    """Each model overfits the random intents and stops at its own epoch, so the lanes end at different times."""
    data = noisy_intents()
    cfg = dict(early_stopping=True, patience=2, epochs=40, batch_size=16, embedding_dim=16, hidden_dim=16, lr=1e-2,
               dropout=0.1)
    processes(1)
    one = train_targets("joint-bilstm-crf", [(data, s) for s in range(5)], progress=False, **cfg)
    processes(2)
    lanes = train_targets("joint-bilstm-crf", [(data, s) for s in range(5)], progress=False, **cfg)
    assert len({m.stopped_epoch for m in one}) > 1
    assert [m.stopped_epoch for m in one] == [m.stopped_epoch for m in lanes]
    assert differing([weights(m) for m in one], [weights(m) for m in lanes]) == []


def test_the_lanes_train_in_threads_of_their_own_and_hooks_see_the_callers_model_indices(one_torch_thread):
    """fit_stacked's hooks get the index of the model in the caller's list, whichever lane trains it."""
    seen: dict[int, set] = {}
    threads: set[str] = set()
    data = generate_snips_like(n_train=40, n_valid=10, n_test=0, seed=2)
    from pytest_privleak.targets import joint_nlu
    from pytest_privleak.targets.stacked import joint as stacked_joint

    config = joint_nlu.JointNLUConfig(epochs=2, batch_size=16, embedding_dim=4, hidden_dim=4)
    runs = [joint_nlu._prepare(data, config, s, f"key{s}", torch.device("cpu")) for s in range(5)]

    def on_epoch(j, state, row):
        seen.setdefault(j, set()).add(row["epoch"])
        threads.add(threading.current_thread().name)

    def before_validation(params, models):
        assert params["word_embedding.weight"].shape[0] == len(models)
        for j in models:
            seen.setdefault(j, set())

    loop.fit_stacked([r.net for r in runs], lambda p, b, n: stacked_joint.losses(p, b, n, dropout=0.0),
                     [stacked_joint.encode(r.train_items, r.width, torch.device("cpu")) for r in runs],
                     [stacked_joint.encode(r.valid_items, r.width, torch.device("cpu")) for r in runs],
                     stacked_joint.take, seeds=list(range(5)), noise_seeds=[r.noise_seed for r in runs],
                     epochs=2, batch_size=16, lr=1e-2, device=torch.device("cpu"), names=[str(j) for j in range(5)],
                     progress=False, on_epoch=on_epoch, before_validation=before_validation, lanes=2)
    assert seen == {j: {1, 2} for j in range(5)}
    assert len(threads) == 2 and all(name.startswith("privleak-stack-lane") for name in threads)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_a_bad_lane_count_is_refused_with_the_fix(bad):
    with pytest.raises(ValueError, match=r"lanes=.* must be an integer >= 1"):
        loop.fit_stacked([torch.nn.Linear(1, 1)], None, [[0]], [[0]], None, seeds=[0], noise_seeds=[0], epochs=1,
                         batch_size=1, lr=0.1, device=torch.device("cpu"), names=["x"], lanes=bad)


def test_the_default_is_the_trainings_this_process_may_run_at_once_and_one_on_a_gpu(processes):
    processes(3)
    assert loop.default_lanes("cpu") == 3
    assert loop.default_lanes("cuda:0") == 1
    processes(1)
    assert loop.default_lanes("cpu") == 1
