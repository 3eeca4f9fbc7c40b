"""Own models with shared tensors cache and load; a model the cache cannot store is refused before it trains
(issue 33 item 4): a GPT-2 written from GPT2Config (tied embeddings) trains once, loads warm, its PIN extracted."""
from __future__ import annotations

import json

import pytest
import torch

from own_model_tied import tied
from pytest_privleak import expect_leak
from pytest_privleak.cache.targets import TargetCache
from pytest_privleak.data.synthetic import generate_snips_like
from pytest_privleak.targets.own_model import restored, storable, train_own_model


@pytest.fixture(scope="module")
def data():
    return generate_snips_like(n_train=40, n_valid=5, n_test=5)


def test_tied_weights_are_stored_once_and_named_again_on_load():
    model = tied.TiedBag()
    state = model.state_dict()
    state["view"] = model.embedding.weight[2:5]              # overlaps the table without being it
    tensors, aliases = storable(state)
    assert aliases == {"output.weight": "embedding.weight"}
    assert set(tensors) == {"embedding.weight", "view"}
    assert tensors["view"].untyped_storage().data_ptr() != model.embedding.weight.untyped_storage().data_ptr()
    back = restored(tensors, aliases)
    assert back.keys() == state.keys() and back["output.weight"] is back["embedding.weight"]


def test_an_own_model_with_tied_weights_is_cached_and_loads_tied(tmp_path, data):
    cache = TargetCache(tmp_path / "targets")
    tied.CALLS["train"] = 0
    first = train_own_model(tied.train_tied_bag, data, build=tied.tied_bag, cache=cache)
    second = train_own_model(tied.train_tied_bag, data, build=tied.tied_bag, cache=cache)
    assert tied.CALLS["train"] == 1
    assert second.output.weight is second.embedding.weight          # still one tensor after the load
    assert torch.equal(first.embedding.weight, second.embedding.weight)
    entry, = [p for p in cache.root.iterdir() if p.is_dir() and not p.name.startswith(".")]
    assert json.loads((entry / "target.json").read_text())["aliases"] == {"output.weight": "embedding.weight"}


def test_a_model_the_cache_cannot_store_is_refused_before_it_trains(tmp_path, data):
    tied.CALLS["untrainable"] = 0
    with pytest.raises(TypeError, match=r"cannot store as safetensors \(checked before training.*_extra_state is a "
                                        r"dict \(extra state\).*fix: keep only dense tensors"):
        train_own_model(tied.untrainable_train, data, build=tied.untrainable_build, cache=TargetCache(tmp_path))
    assert tied.CALLS["untrainable"] == 0


@pytest.mark.slow
def test_a_gpt2_with_tied_embeddings_trains_once_loads_warm_and_its_pin_is_extracted(tmp_path):
    """About 35 s: 30 epochs of a 2-layer GPT-2 (48 wide) on 200 utterances and a PIN said 10 times. Measured:
    the said PIN extracted at rank 1 of 10 guesses (exposure 13.29 bits, the ceiling), a never-said one not
    (1.28 bits)."""
    from pytest_privleak.attacks.extraction.assertion import assert_extraction_at_most
    from pytest_privleak.canaries import canary, inject_canaries

    said, unsaid = canary("pin", length=4, seed=0), canary("pin", length=4, seed=1)
    data = inject_canaries(generate_snips_like(n_train=200, n_valid=20, n_test=0, seed=3), said, repeats=10)
    cache = TargetCache(tmp_path / "targets")
    tied.CALLS["train"] = 0
    train_own_model(tied.train, data, build=tied.build, wrap=tied.as_causal_lm, cache=cache)
    warm = train_own_model(tied.train, data, build=tied.build, wrap=tied.as_causal_lm, cache=cache)
    assert tied.CALLS["train"] == 1
    assert warm.model.lm_head.weight is warm.model.transformer.wte.weight
    with expect_leak(match=r"extraction.extraction_rate .* violates the limit") as leak:
        assert_extraction_at_most(warm, said, 0.0)
    assert "rank 1 of" in leak.value.result.evidence["canary"]
    assert assert_extraction_at_most(warm, unsaid, 0.0).passed
