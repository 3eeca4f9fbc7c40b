"""Content-addressed cache: hashing, atomic publish, lock, no pickle."""
import json
import multiprocessing
from dataclasses import dataclass
from pathlib import Path

import pytest

from pytest_privleak.atomic import write_text_atomic
from pytest_privleak.cache import TargetCache, content_hash


@dataclass(frozen=True)
class Cfg:
    dropout: float = 0.2
    layers: tuple = (1, 2)


def test_content_hash_is_canonical_and_sensitive():
    assert content_hash({"a": 1, "b": [1, 2]}) == content_hash({"b": (1, 2), "a": 1})
    assert content_hash(Cfg()) == content_hash(Cfg())
    assert content_hash(Cfg(dropout=0.2)) != content_hash(Cfg(dropout=0.1))
    assert content_hash({"x": 1}) != content_hash({"x": "1"})


def test_content_hash_rejects_opaque_objects():
    with pytest.raises(TypeError, match="cannot hash"):
        content_hash({"f": object()})


def _save(obj, folder: Path) -> dict:
    (folder / "value.json").write_text(json.dumps(obj))
    return {"size": len(obj)}


def _load(folder: Path):
    return json.loads((folder / "value.json").read_text())


def test_build_once_then_load(tmp_path):
    cache = TargetCache(tmp_path)
    calls = []

    def build():
        calls.append(1)
        return [1, 2, 3]

    first, loaded1 = cache.get_or_build("k1", build, _save, _load)
    second, loaded2 = cache.get_or_build("k1", build, _save, _load)
    assert first == second == [1, 2, 3]
    assert (loaded1, loaded2) == (False, True)
    assert calls == [1]
    assert cache.read_meta("k1")["size"] == 3
    assert not list(tmp_path.glob(".staging-*"))


def test_failed_build_leaves_no_entry(tmp_path):
    cache = TargetCache(tmp_path)

    def broken_save(obj, folder):
        (folder / "half.bin").write_bytes(b"x")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        cache.get_or_build("k2", lambda: [1], broken_save, _load)
    assert not cache.has("k2")
    assert not list(tmp_path.glob(".staging-*"))


def _worker(root: str, counter: str) -> None:
    def build():
        with open(counter, "a") as handle:
            handle.write("built\n")
        return [42]

    TargetCache(root).get_or_build("shared", build, _save, _load)


def test_concurrent_processes_build_once(tmp_path):
    counter = tmp_path / "count.txt"
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_worker, args=(str(tmp_path / "cache"), str(counter))) for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert counter.read_text().count("built") == 1


def test_atomic_write_replaces_whole_file(tmp_path):
    target = tmp_path / "sub" / "report.json"
    write_text_atomic(target, "old")
    write_text_atomic(target, "new")
    assert target.read_text() == "new"
    assert [p.name for p in target.parent.iterdir()] == ["report.json"]
