"""The attack-result cache for the embedding attacks (§V inversion, §VI keywords) and for defended encoders.

An encoder that declares a content hash (``privleak_minilm`` does, from its
files) is attacked once; the same call loads its results, with the limit of
the new call applied, and a message equal to the computed one but for the
line saying it was loaded. A defence wraps its inner encoder's hash into its
own, so a defended encoder is cached too, unless its inner encoder changed.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")

from helpers_embeddings import tiny_encoder  # noqa: E402
from helpers_result_cache import active_result_cache, drop_cache_line, leak_message, without_cache_line  # noqa: E402

from pytest_privleak.cache import results as rc  # noqa: E402
from pytest_privleak.adapters.encoder import folder_content_hash  # noqa: E402
from pytest_privleak.embeddings.corpora import medical_corpus  # noqa: E402
from pytest_privleak.embeddings.defences import laplace_noise, rounded, subspace_projection  # noqa: E402
from pytest_privleak.embeddings.inversion_assertion import (assert_embedding_inversion_at_most,  # noqa: E402
                                                            measure_embedding_inversion)
from pytest_privleak.embeddings.keyword_assertion import (assert_keyword_inference_at_most,  # noqa: E402
                                                         default_corpora, measure_keyword_inference)

KEYWORDS = ("leg", "hand")
INVERSION = dict(n_train=1000, n_victims=200, steps=150, sub_attacks=("year",))
HASH = "ef" * 32


@pytest.fixture
def cache(tmp_path):
    """An active result cache in a fresh folder (the plugin's own, if any, is restored afterwards)."""
    with active_result_cache(tmp_path / "results") as made:
        yield made


@pytest.fixture
def encoder(one_torch_thread):
    return rc.mark_content_hash(tiny_encoder(seed=0), HASH)


@pytest.fixture(scope="module")
def corpora():
    victims, shadow, _ = default_corpora(300, 0)
    return victims, shadow


def test_keyword_inference_is_attacked_once_and_the_limit_applies_afresh(cache, encoder, corpora):
    victims, shadow = corpora
    call = lambda: assert_keyword_inference_at_most(encoder, KEYWORDS, 0.6, victims=victims, shadow=shadow)
    computed, loaded = leak_message(call), leak_message(call)
    assert len(cache.stored) == 1 and len(cache.loaded) == 1
    assert "loaded from the result cache" in loaded and drop_cache_line(loaded) == computed
    passed = assert_keyword_inference_at_most(encoder, KEYWORDS, 1.0, victims=victims, shadow=shadow)
    assert passed.verdict == "pass" and passed.threshold == 1.0 and len(cache.loaded) == 2
    measured = measure_keyword_inference(encoder, KEYWORDS, victims=victims, shadow=shadow)
    assert measured.threshold is None and without_cache_line(measured) == \
        without_cache_line(dataclasses.replace(passed, threshold=None))
    measure_keyword_inference(encoder, KEYWORDS, victims=victims, shadow=shadow, seed=1)   # another seed: computed
    assert len(cache.stored) == 2


def test_embedding_inversion_is_attacked_once_with_or_without_its_top5_gate(cache, encoder):
    call = lambda: assert_embedding_inversion_at_most(encoder, "citizen-id", max_top1=0.02, **INVERSION)
    computed, loaded = leak_message(call), leak_message(call)
    assert len(cache.stored) == 1 and len(cache.loaded) == 1
    assert drop_cache_line(loaded) == computed
    gated = assert_embedding_inversion_at_most(encoder, "citizen-id", max_top1=1.0, max_top5=1.0, **INVERSION)
    assert [r.metric for r in gated] == ["top1_year", "top5_year"] and len(cache.stored) == 2
    assert all(r.threshold == 1.0 and r.verdict == "pass" for r in gated)
    measured = measure_embedding_inversion(encoder, "citizen-id", **INVERSION)
    assert [r.metric for r in measured] == ["top1_year"] and measured[0].threshold is None
    assert len(cache.loaded) == 2      # same measurement as the first call's


def test_a_defended_encoder_inherits_a_hash_from_its_inner_encoder_and_its_own_inputs():
    inner = rc.mark_content_hash(tiny_encoder(seed=0), HASH)
    texts = medical_corpus(60, np.random.default_rng(3)).texts
    a = subspace_projection(inner, KEYWORDS, texts, beta=0.1)
    b = subspace_projection(inner, KEYWORDS, texts, beta=0.1)
    c = subspace_projection(inner, KEYWORDS, texts, beta=0.2)
    assert rc.model_hash(a) == rc.model_hash(b) is not None and rc.model_hash(c) not in (None, rc.model_hash(a))
    assert rc.model_hash(rounded(inner, 1)) not in (None, rc.model_hash(rounded(inner, 2)))
    # Laplace noise draws from a state each call consumes: never cached
    assert rc.model_hash(laplace_noise(inner, 1.0, sensitivity=1.0)) is None
    # the inner encoder without a hash: its defences have none either
    assert rc.model_hash(subspace_projection(tiny_encoder(seed=0), KEYWORDS, texts, beta=0.1)) is None
    # the inner encoder's weights changed after the defence was built: the defence's hash is void
    with torch.no_grad():
        next(inner.model.parameters()).add_(1.0)
    assert rc.model_hash(inner) is None and rc.model_hash(a) is None


def test_folder_content_hash_follows_every_file_and_setting(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "vocab.txt").write_text("a\nb\n")
    first = folder_content_hash(str(tmp_path), device_type="cpu")
    assert first == folder_content_hash(str(tmp_path), device_type="cpu")
    assert first != folder_content_hash(str(tmp_path), device_type="cuda")
    (tmp_path / "sub" / "vocab.txt").write_text("a\nc\n")
    assert folder_content_hash(str(tmp_path), device_type="cpu") != first


def test_changing_a_defences_or_an_encoders_settings_after_hashing_voids_the_hash():
    inner = rc.mark_content_hash(tiny_encoder(seed=0), HASH)
    texts = medical_corpus(60, np.random.default_rng(3)).texts
    defence = subspace_projection(inner, KEYWORDS, texts, beta=0.1)
    rounding = rounded(inner, 1)
    assert None not in (rc.model_hash(defence), rc.model_hash(rounding))
    rounding.decimals = 3
    defence.basis = defence.basis[:, :1].copy()
    assert rc.model_hash(rounding) is None and rc.model_hash(defence) is None
    inner.max_length = 8
    assert rc.model_hash(inner) is None
