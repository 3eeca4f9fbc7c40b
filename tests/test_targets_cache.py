"""Trained targets in the content-addressed cache: reuse, file format, damage, concurrent workers."""
import json
import multiprocessing
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from pytest_privleak.cache.targets import CacheEntryError, CacheEntryWarning, TargetCache
from pytest_privleak.cache.manifest import HMAC_KEY_ENV, file_digests
from pytest_privleak.finite import NonFiniteError
from pytest_privleak.canaries import canary, inject_canaries
from pytest_privleak.data.synthetic import generate_snips_like
from pytest_privleak.targets import train_target
from pytest_privleak.targets.joint_nlu import JointNLUConfig
from pytest_privleak.targets.lstm_lm import LSTMLMConfig
from pytest_privleak.targets.ner_tagger import NERTaggerConfig
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
    base = cache_key("joint-bilstm-crf", data, JointNLUConfig(), 0, "cpu")
    assert base == cache_key("joint-bilstm-crf", data, JointNLUConfig(), 0, "cpu")
    assert base != cache_key("joint-bilstm-crf", data, JointNLUConfig(dropout=0.1), 0, "cpu")
    assert base != cache_key("joint-bilstm-crf", data, JointNLUConfig(), 1, "cpu")
    assert base != cache_key("joint-bilstm-crf", data.replace(test=data.test[:-1]), JointNLUConfig(), 0, "cpu")
    assert base != cache_key("joint-bilstm-crf", data, JointNLUConfig(), 0, "cuda:0")
    assert cache_key("joint-bilstm-crf", data, JointNLUConfig(), 0, "cuda:0") == \
        cache_key("joint-bilstm-crf", data, JointNLUConfig(), 0, "cuda:1")   # GPU index is not part of it


def _rewrite_weights(entry: Path, change) -> None:
    from safetensors.torch import load_file, save_file

    tensors = load_file(str(entry / WEIGHTS_FILE))
    save_file({name: change(name, t) for name, t in tensors.items()}, str(entry / WEIGHTS_FILE))


def _edit_record(entry: Path, change) -> None:
    record = json.loads((entry / TARGET_FILE).read_text())
    change(record)
    (entry / TARGET_FILE).write_text(json.dumps(record))


def _swap_vocabulary(record):
    tokens = record["vocab"]["tokens"]
    tokens[2], tokens[3] = tokens[3], tokens[2]


def _forge_content_hash(record):
    record["content_hash"] = "0" * 64


DAMAGE = {
    # accidental damage
    "truncate-weights": lambda e: (e / WEIGHTS_FILE).write_bytes((e / WEIGHTS_FILE).read_bytes()[:100]),
    "delete-weights": lambda e: (e / WEIGHTS_FILE).unlink(),
    "garble-json": lambda e: (e / TARGET_FILE).write_text("{not json"),
    "delete-manifest": lambda e: (e / "meta.json").unlink(),
    # valid files, edited content: the old cache loaded and attacked these as if genuine
    "swap-vocabulary": lambda e: _edit_record(e, _swap_vocabulary),
    "zero-weights": lambda e: _rewrite_weights(e, lambda n, t: torch.zeros_like(t)),
    "nan-weights": lambda e: _rewrite_weights(e, lambda n, t: torch.full_like(t, float("nan"))),
    "forge-content-hash": lambda e: _edit_record(e, _forge_content_hash),
    "forge-manifest-key": lambda e: (e / "meta.json").write_text(
        json.dumps({**json.loads((e / "meta.json").read_text()), "key": "f" * 64})),
    "extra-file": lambda e: (e / "model.bin").write_bytes(b"\x80\x04\x95"),
}
EXPECTED = {
    "truncate-weights": "model.safetensors has sha256", "delete-weights": "model.safetensors is missing",
    "garble-json": "target.json has sha256", "delete-manifest": "meta.json is missing",
    "swap-vocabulary": "target.json has sha256", "zero-weights": "model.safetensors has sha256",
    "nan-weights": "model.safetensors has sha256", "forge-content-hash": "target.json has sha256",
    "forge-manifest-key": "records key 'ffff", "extra-file": "model.bin was added",
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_damaged_or_edited_entry_is_never_loaded_but_retrained_with_a_warning(tmp_path, damage, capsys):
    cache = TargetCache(tmp_path)
    first = train(cache)
    entry = the_entry(cache)
    DAMAGE[damage](entry)
    with pytest.warns(CacheEntryWarning, match=re.escape(str(entry)) + ".*" + re.escape(EXPECTED[damage])):
        again = train(cache)
    assert again.loaded_from_cache is False
    assert "never attacks such an entry" in capsys.readouterr().err
    np.testing.assert_array_equal(again.score(tiny_data().test), first.score(tiny_data().test))
    assert train(cache).loaded_from_cache is True          # the rebuilt entry is whole again


def test_entry_copied_under_another_key_is_refused(tmp_path):
    """An entry of one target renamed to another's key (a forged content hash) must not load as that target."""
    cache = TargetCache(tmp_path)
    other = train(cache, hidden_dim=6)
    wanted = cache_key("joint-bilstm-crf", tiny_data(), JointNLUConfig(**TINY), 0, "cpu")
    shutil.copytree(cache.entry(other.content_hash), cache.entry(wanted))
    with pytest.warns(CacheEntryWarning, match=f"records key '{other.content_hash}'"):
        model = train(cache)
    assert model.loaded_from_cache is False and model.content_hash == wanted
    assert model.config.hidden_dim == 8


def _rewrite_manifest(entry: Path) -> None:
    """What a deliberate tamperer does: edit a file, then recompute the digests beside it."""
    meta = json.loads((entry / "meta.json").read_text())
    meta["files"] = file_digests(entry)
    (entry / "meta.json").write_text(json.dumps(meta))


def test_nan_weights_are_refused_even_when_the_manifest_was_rewritten_to_match(tmp_path):
    cache = TargetCache(tmp_path)
    train(cache)
    entry = the_entry(cache)
    DAMAGE["nan-weights"](entry)
    _rewrite_manifest(entry)
    assert cache.problems(entry.name) == []                 # the digests alone cannot see this
    with pytest.warns(CacheEntryWarning, match="weight '.*'.*NaN or infinite"):
        assert train(cache).loaded_from_cache is False


def test_forged_content_hash_is_refused_even_when_the_manifest_was_rewritten(tmp_path):
    cache = TargetCache(tmp_path)
    train(cache)
    entry = the_entry(cache)
    _edit_record(entry, _forge_content_hash)
    _rewrite_manifest(entry)
    with pytest.warns(CacheEntryWarning, match="records content hash '0000"):
        assert train(cache).loaded_from_cache is False


def test_hmac_secret_detects_a_rewritten_manifest(tmp_path, monkeypatch):
    monkeypatch.setenv(HMAC_KEY_ENV, "a secret kept outside the cache")
    cache = TargetCache(tmp_path)
    train(cache)
    assert train(cache).loaded_from_cache is True           # a signed entry verifies
    entry = the_entry(cache)
    _edit_record(entry, _swap_vocabulary)
    _rewrite_manifest(entry)
    with pytest.warns(CacheEntryWarning, match="HMAC does not match"):
        assert train(cache).loaded_from_cache is False


def test_on_mismatch_error_raises_naming_the_entry_and_how_to_clear_it(tmp_path):
    cache = TargetCache(tmp_path, on_mismatch="error")
    train(cache)
    entry = the_entry(cache)
    DAMAGE["zero-weights"](entry)
    with pytest.raises(CacheEntryError, match=re.escape(str(entry)) + ".*sha256.*rm -rf"):
        train(cache)
    assert entry.exists()                                   # kept for whoever investigates


def test_diverged_training_is_not_cached(tmp_path):
    cache = TargetCache(tmp_path)
    with pytest.raises(NonFiniteError, match="trained weights .*training diverged"):
        train(cache, lr=1e36)
    assert not [p for p in tmp_path.iterdir() if p.is_dir()]


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


@pytest.mark.parametrize("cls", [JointNLUConfig, LSTMLMConfig, NERTaggerConfig])
def test_equal_numbers_give_one_cache_key(cls):
    """Train once per content hash: unk_alpha=0 and 0.0, or lr as a numpy float, used to key two entries."""
    data = tiny_data()
    kind = {JointNLUConfig: "joint-bilstm-crf", LSTMLMConfig: "lstm-lm", NERTaggerConfig: "ner-bilstm-crf"}[cls]
    base = cache_key(kind, data, cls(unk_alpha=0.0, lr=5e-3, grad_clip=5.0), 0, "cpu")
    assert base == cache_key(kind, data, cls(unk_alpha=0, lr=np.float64(5e-3), grad_clip=5), 0, "cpu")
    assert base != cache_key(kind, data, cls(unk_alpha=0.25, lr=5e-3, grad_clip=5.0), 0, "cpu")
    assert base != cache_key(kind, data, cls(unk_alpha=0.0, lr=5e-3, grad_clip=5.0, extra_tokens=["x"]), 0, "cpu")
