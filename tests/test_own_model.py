"""train_own_model: a team's own torch model trained once per content hash, its attacks cached with it."""
from __future__ import annotations

import functools
import json
import shutil
import textwrap

import pytest
import torch

from own_model_fixture import bag
from pytest_privleak.cache import results as rc
from pytest_privleak.cache.targets import CacheEntryWarning, TargetCache
from pytest_privleak.data.synthetic import generate_snips_like
from pytest_privleak.targets.own_model import source_digest, train_own_model


@pytest.fixture(scope="module")
def data():
    return generate_snips_like(n_train=80, n_valid=10, n_test=10)


@pytest.fixture
def cache(tmp_path):
    return TargetCache(tmp_path / "targets")


def _weights(module):
    return {k: v.clone() for k, v in module.state_dict().items()}


def test_trained_once_then_loaded_with_the_same_weights_and_a_content_hash(cache, data):
    bag.CALLS["train"] = 0
    first = train_own_model(bag.train, data, build=bag.untrained, wrap=bag.Adapter, cache=cache, steps=5)
    second = train_own_model(bag.train, data, build=bag.untrained, wrap=bag.Adapter, cache=cache, steps=5)
    assert bag.CALLS["train"] == 1
    assert isinstance(first, bag.Adapter) and isinstance(second, bag.Adapter)
    assert not second.model.training
    a, b = _weights(first.model), _weights(second.model)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert rc.model_hash(first) == rc.model_hash(second) is not None
    entry, = [p for p in cache.root.iterdir() if p.is_dir() and not p.name.startswith(".")]
    assert (entry / "model.safetensors").is_file() and not list(entry.glob("*.pt")) and not list(entry.glob("*.pkl"))
    record = json.loads((entry / "target.json").read_text())
    assert record["kind"] == "own-model" and record["config"] == {"steps": 5}


def test_the_key_follows_config_seed_data_and_the_source(cache, data, tmp_path):
    helper = tmp_path / "helper.py"
    helper.write_text("WIDTH = 8\n")
    run = lambda **kw: rc.model_hash(train_own_model(bag.train, kw.pop("data", data), build=bag.untrained,
                                                     cache=cache, sources=[helper], **kw))
    base = run(steps=3)
    assert base == run(steps=3)
    others = {run(steps=4), run(steps=3, seed=1), run(steps=3, data=generate_snips_like(n_train=81, n_valid=10,
                                                                                          n_test=10))}
    helper.write_text("WIDTH = 9\n")
    others.add(run(steps=3))
    assert len(others | {base}) == 5


def test_the_package_that_defines_the_model_is_part_of_the_key():
    digest = source_digest({"train": bag.train, "module": bag.Bag, "wrap": None})
    assert sorted(p.rsplit("/", 1)[-1] for p in digest) == ["__init__.py", "bag.py"]


def test_the_adapter_changes_the_models_hash_but_not_its_entry(cache, data):
    """Attack results depend on the adapter, the weights do not: another wrap re-runs the attacks, not training."""
    bag.CALLS["train"] = 0
    plain = train_own_model(bag.train, data, build=bag.untrained, cache=cache, steps=2)
    wrapped = train_own_model(bag.train, data, build=bag.untrained, wrap=bag.Adapter, cache=cache, steps=2)
    assert bag.CALLS["train"] == 1
    assert None not in (rc.model_hash(plain), rc.model_hash(wrapped)) and rc.model_hash(plain) != rc.model_hash(wrapped)


def test_a_damaged_entry_is_discarded_and_retrained_with_a_warning(cache, data):
    bag.CALLS["train"] = 0
    model = train_own_model(bag.train, data, build=bag.untrained, cache=cache, steps=2)
    entry, = [p for p in cache.root.iterdir() if p.is_dir() and not p.name.startswith(".")]
    raw = bytearray((entry / "model.safetensors").read_bytes())
    raw[-1] ^= 0xFF
    (entry / "model.safetensors").write_bytes(bytes(raw))
    with pytest.warns(CacheEntryWarning, match="retrained"):
        again = train_own_model(bag.train, data, build=bag.untrained, cache=cache, steps=2)
    assert bag.CALLS["train"] == 2 and rc.model_hash(again) == rc.model_hash(model)


def test_without_a_cache_it_trains_every_time_and_declares_no_hash(data):
    bag.CALLS["train"] = 0
    model = train_own_model(bag.train, data, build=bag.untrained, cache=None, steps=2)
    train_own_model(bag.train, data, build=bag.untrained, cache=None, steps=2)
    assert bag.CALLS["train"] == 2 and rc.model_hash(model) is None


@pytest.mark.parametrize("kwargs, error, words", [
    (dict(build=bag.wrong_width), ValueError, ["build=", "wrong_width", "same architecture"]),
    (dict(build=bag.untrained, train=bag.not_a_module), TypeError, ["not_a_module", "dict", "torch.nn.Module"]),
    (dict(build="Bag"), TypeError, ["build=", "untrained torch.nn.Module"]),
    (dict(build=bag.untrained, wrap=3), TypeError, ["wrap=", "adapter"]),
    (dict(build=bag.untrained, steps=object()), TypeError, ["plain JSON", "cache key"]),
    (dict(build=bag.untrained, sources=["no/such/file.py"]), FileNotFoundError, ["no/such/file.py", "sources="]),
])
def test_bad_arguments_are_refused_naming_the_argument_and_the_fix(cache, data, kwargs, error, words):
    train = kwargs.pop("train", bag.train)
    with pytest.raises(error) as info:
        train_own_model(train, data, cache=cache, **kwargs)
    for word in words:
        assert word in str(info.value)
    assert not [p for p in cache.root.glob("*") if p.is_dir() and not p.name.startswith(".")]  # nothing cached


def test_a_dataset_without_a_content_hash_is_refused(cache):
    with pytest.raises(TypeError, match="content_hash"):
        train_own_model(bag.train, [("hello",)], build=bag.untrained, cache=cache)


def test_in_a_pytest_run_the_second_run_trains_nothing_and_attacks_nothing(pytester):
    """End to end through the fixture: the second run loads the weights and the exposure result."""
    shutil.copytree(pytest.importorskip("own_model_fixture").__path__[0], pytester.path / "own_model_fixture")
    pytester.makeini("[pytest]\nprivleak_cache_dir = .cache\n")
    pytester.makepyfile(test_own=textwrap.dedent("""
        import pytest
        from own_model_fixture import bag
        from pytest_privleak import assert_exposure_below, PrivacyLeakError
        from pytest_privleak.attacks.exposure.attack import compute_exposure

        class Scored(bag.Adapter):
            '''The exposure protocol: lower score = likelier (the intent's cross-entropy of the mean embedding).'''
            def score(self, utterances):
                import torch
                index = {w: i for i, w in enumerate(self.model.words)}
                out = []
                with torch.no_grad():
                    for u in utterances:
                        ids = torch.tensor([index.get(t, 0) for t in u.tokens])
                        logits = self.model.head(self.model.embedding(ids).mean(0))
                        out.append(float(torch.nn.functional.cross_entropy(
                            logits[None], torch.tensor([self.model.intents.index(u.intent)]))))
                return out

        def test_exposure(train_own_model, nlu_dataset, canary, inject_canaries):
            pin = canary("pin", length=2)
            model = train_own_model(bag.train, inject_canaries(nlu_dataset, pin, repeats=5), build=bag.untrained,
                                    wrap=Scored, steps=3)
            print("TRAIN CALLS", bag.CALLS["train"])
            result = assert_exposure_below(model, pin, max_bits=100.0, name="own")
            print("EVIDENCE", sorted(result.evidence))
    """))
    first = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-s")
    first.assert_outcomes(passed=1)
    first.stdout.fnmatch_lines(["*TRAIN CALLS 1*"])
    assert "result cache" not in "".join(l for l in first.outlines if l.startswith("EVIDENCE"))
    second = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-s")
    second.assert_outcomes(passed=1)
    second.stdout.fnmatch_lines(["*TRAIN CALLS 0*", "*EVIDENCE*result cache*"])


def _closure_train():
    steps = 3

    def train(dataset, seed=0):
        return bag.train(dataset, seed=seed, steps=steps)
    return train


class _CallableTrain:
    steps = 3

    def __call__(self, dataset, seed=0):
        return bag.train(dataset, seed=seed, steps=self.steps)


@pytest.mark.parametrize("train, kind", [
    (functools.partial(bag.train, steps=3), "functools.partial"),
    (_closure_train(), "closure"),
    (_CallableTrain(), "callable object"),
])
def test_a_train_with_bound_state_is_refused_because_the_key_cannot_see_it(cache, data, train, kind):
    with pytest.raises(TypeError) as info:
        train_own_model(train, data, build=bag.untrained, cache=cache)
    assert kind in str(info.value) and "**config" in str(info.value)


def test_another_build_changes_the_models_hash_and_both_runs_return_what_build_makes(cache, data):
    first = train_own_model(bag.train, data, build=bag.untrained, cache=cache, steps=2)
    other = train_own_model(bag.train, data, build=bag.reversed_words, cache=cache, steps=2)
    assert type(first) is bag.Bag and other.words == first.words[::-1]
    assert rc.model_hash(first) != rc.model_hash(other)


def test_a_bare_module_changed_in_place_loses_its_hash(cache, data):
    model = train_own_model(bag.train, data, build=bag.untrained, cache=cache, steps=2)
    assert rc.model_hash(model) is not None
    with torch.no_grad():
        model.head.weight.zero_()
    assert rc.model_hash(model) is None
