"""The privacy-preserving mapping (§VII (3)) moves keyword inference toward chance on a tiny encoder (utility printed)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")

from helpers_embeddings import tiny_encoder  # noqa: E402

from pytest_privleak.embeddings.corpora import medical_corpus  # noqa: E402
from pytest_privleak.embeddings.defences import privacy_preserving_mapping  # noqa: E402
from pytest_privleak.embeddings.keyword_assertion import (assert_keyword_inference_at_most,  # noqa: E402
                                                         default_corpora, measure_keyword_inference)
from pytest_privleak.embeddings.utility import measure_utility  # noqa: E402
from pytest_privleak.embeddings.words import has_word  # noqa: E402


def test_ppm_trained_against_leg_moves_the_white_box_attack_toward_chance():
    torch.set_num_threads(1)
    encoder = tiny_encoder(seed=0)
    victims, shadow, _ = default_corpora(600, 0)
    defender = medical_corpus(1000, np.random.default_rng(9)).texts
    secrets = np.array([has_word(t, "leg") for t in defender], dtype=np.int64)
    defended = privacy_preserving_mapping(encoder, defender, secrets, lam=0.01, steps=600)
    raw = measure_keyword_inference(encoder, ["leg"], victims=victims, shadow=shadow)
    utility = dict(n_train=400, n_test=300, steps=300)
    u_raw, u_def = measure_utility(encoder, **utility), measure_utility(defended, **utility)
    after = assert_keyword_inference_at_most(defended, ["leg"], 0.75, victims=victims, shadow=shadow)
    print(f"\nppm lambda=0.01, 600 rounds (distortion {defended.distortion:.3f}): white-box 'leg' {raw.value:.3f} -> "
          f"{after.value:.3f} (chance 0.5); utility {u_raw.accuracy:.3f} -> {u_def.accuracy:.3f} "
          f"(cost {u_raw.accuracy - u_def.accuracy:+.3f})")
    assert raw.value > 0.85, raw.explain()
    assert after.value - 0.5 < 0.6 * (raw.value - 0.5)
