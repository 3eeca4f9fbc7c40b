"""The result cache's code fingerprint covers the whole package's source (issue 24, found while measuring item 6).

Since the layout move of issue 17, the digest covered only the ``cache`` wing (the folder of its own module),
so an edited attack kept loading the figures its old code had computed: a warm run after an edit to
``attacks/`` loaded 13 of the sample project's 14 results.
"""
from __future__ import annotations

import shutil

import pytest

import pytest_privleak
from pytest_privleak.cache import results as rc


@pytest.fixture
def fresh_fingerprint():
    rc.code_fingerprint.cache_clear()
    yield rc.code_fingerprint
    rc.code_fingerprint.cache_clear()


def test_the_digest_covers_every_source_file_of_the_package():
    root = rc.PACKAGE_ROOT
    assert root.name == "pytest_privleak" and (root / "__init__.py").samefile(pytest_privleak.__file__)
    covered = {p.relative_to(root).as_posix() for p in rc.source_files()}
    assert {"attacks/exposure/attack.py", "results.py", "cache/results.py", "embeddings/keywords.py"} <= covered
    assert covered == {p.relative_to(root).as_posix() for p in root.rglob("*.py")}


def test_editing_an_attack_outside_the_cache_wing_changes_the_fingerprint(tmp_path, monkeypatch, fresh_fingerprint):
    copy = tmp_path / "pytest_privleak"
    shutil.copytree(rc.PACKAGE_ROOT, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(rc, "PACKAGE_ROOT", copy)
    before = fresh_fingerprint()["source"]
    fresh_fingerprint.cache_clear()
    assert fresh_fingerprint()["source"] == before                  # the same sources, the same digest
    with (copy / "attacks" / "exposure.py").open("a", encoding="utf-8") as f:
        f.write("\n# an edit\n")
    fresh_fingerprint.cache_clear()
    assert fresh_fingerprint()["source"] != before
