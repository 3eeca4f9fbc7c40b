"""Trained targets in the content-addressed cache: reuse, file format, damage, concurrent workers."""
import json
import multiprocessing
from pathlib import Path

import numpy as np
import pytest
import torch

from pytest_privleak.cache import TargetCache
from pytest_privleak.canaries import canary, inject_canaries
from pytest_privleak.data.synthetic import generate_snips_like
from pytest_privleak.targets import train_target
from pytest_privleak.targets.training import CODE_VERSION, TARGET_FILE, WEIGHTS_FILE, cache_key

TINY = dict(epochs=2, batch_size=16, embedding_dim=8, hidden_dim=8, char_dim=4, char_filters=6)


def tiny_data():
    return inject_canaries(generate_snips_like(n_train=60, n_valid=15, n_test=15, seed=4),
                           canary("pin", 4, seed=1), repeats=10)


def train(cache, **config):
    return train_target("joint-bilstm-crf", tiny_data(), cache=cache, seed=0, progress=False, **{**TINY, **config})


def the_entry(cache: TargetCache) -> Path:
    entries = [p for p in cache.root.iterdir() if p.is_dir() and not p.name.startswith(".")]
    assert len(entries) == 1, entries
    return entries[0]


def test_second_call_loads_the_same_model(tmp_path):
    cache = TargetCache(tmp_path)
    first = train(cache, char_embeddings=True)
    second = train(cache, char_embeddings=True)
    assert (first.loaded_from_cache, second.loaded_from_cache) == (False, True)
    assert second.content_hash == first.content_hash
    data = tiny_data()
    np.testing.assert_array_equal(second.score(data.test), first.score(data.test))
    torch.testing.assert_close(second.input_embeddings(), first.input_embeddings(), rtol=0, atol=0)
    assert second.training_history == first.training_history and second.config == first.config
    assert second.vocabulary == first.vocabulary


def test_entry_is_safetensors_plus_json_and_never_a_pickle(tmp_path):
    cache = TargetCache(tmp_path)
    model = train(cache)
    entry = the_entry(cache)
    assert entry.name == model.content_hash
    assert sorted(p.name for p in entry.iterdir()) == sorted(["meta.json", TARGET_FILE, WEIGHTS_FILE])
    record = json.loads((entry / TARGET_FILE).read_text())
    assert record["kind"] == "joint-bilstm-crf" and record["code_version"] == CODE_VERSION
    assert record["config"]["hidden_dim"] == 8 and record["vocab"]["tokens"][:2] == ["<pad>", "<unk>"]
    raw = (entry / WEIGHTS_FILE).read_bytes()
    header_len = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + header_len])          # safetensors: a JSON header, then raw tensors
    assert "word_embedding.weight" in header
    assert not any(b"\x80\x04\x95" in p.read_bytes()[:4] for p in entry.iterdir())  # no pickle protocol-4


def test_key_changes_with_data_config_seed_and_device_type():
    data = tiny_data()
    from pytest_privleak.targets.joint_nlu import JointNLUConfig

    base = cache_key("joint-bilstm-crf", data, JointNLUConfig(), 0, "cpu")
    assert base == cache_key("joint-bilstm-crf", data, JointNLUConfig(), 0, "cpu")
    assert base != cache_key("joint-bilstm-crf", data, JointNLUConfig(dropout=0.1), 0, "cpu")
    assert base != cache_key("joint-bilstm-crf", data, JointNLUConfig(), 1, "cpu")
    assert base != cache_key("joint-bilstm-crf", data.replace(test=data.test[:-1]), JointNLUConfig(), 0, "cpu")
    assert base != cache_key("joint-bilstm-crf", data, JointNLUConfig(), 0, "cuda:0")
    assert cache_key("joint-bilstm-crf", data, JointNLUConfig(), 0, "cuda:0") == \
        cache_key("joint-bilstm-crf", data, JointNLUConfig(), 0, "cuda:1")   # GPU index is not part of it


@pytest.mark.parametrize("damage", ["truncate-weights", "delete-weights", "garble-json", "wrong-shapes"])
def test_damaged_entry_is_rebuilt(tmp_path, damage, capsys):
    cache = TargetCache(tmp_path)
    first = train(cache)
    entry = the_entry(cache)
    if damage == "truncate-weights":
        raw = (entry / WEIGHTS_FILE).read_bytes()
        (entry / WEIGHTS_FILE).write_bytes(raw[: len(raw) // 2])
    elif damage == "delete-weights":
        (entry / WEIGHTS_FILE).unlink()
    elif damage == "garble-json":
        (entry / TARGET_FILE).write_text("{not json")
    else:
        record = json.loads((entry / TARGET_FILE).read_text())
        record["config"]["hidden_dim"] = 9
        (entry / TARGET_FILE).write_text(json.dumps(record))
    again = train(cache)
    assert again.loaded_from_cache is False
    assert "unreadable" in capsys.readouterr().err or damage == "wrong-shapes"
    np.testing.assert_array_equal(again.score(tiny_data().test), first.score(tiny_data().test))
    assert train(cache).loaded_from_cache is True          # the rebuilt entry is whole again


def test_no_cache_means_no_files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model = train(None)
    assert model.loaded_from_cache is False
    assert list(tmp_path.iterdir()) == []


def _concurrent_worker(root: str, barrier, results) -> None:
    barrier.wait()                                # both ask for the same target at the same moment
    model = train(TargetCache(root), epochs=4)
    results.put((model.loaded_from_cache, model.content_hash))


def test_concurrent_workers_train_once(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_concurrent_worker, args=(str(tmp_path), barrier, results)) for _ in range(2)]
    for proc in procs:
        proc.start()
    outcomes = [results.get(timeout=180) for _ in procs]
    for proc in procs:
        proc.join(timeout=60)
        assert proc.exitcode == 0
    assert sorted(loaded for loaded, _ in outcomes) == [False, True]     # one trained, one loaded
    assert len({key for _, key in outcomes}) == 1
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".staging")]
