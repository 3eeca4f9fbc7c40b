"""Privacy tests of the sentence encoder behind our patient guide (all-MiniLM-L6-v2), as a team writes them.

The hospital shares embeddings of patients' descriptions, not the texts. Can
whoever holds the embeddings tell which body part a description names
(privacy-risks-language-model-embeddings §VI)? Our descriptions are
stood in for by the plugin's generated medical-style corpus.
"""
import numpy as np
import pytest

from pytest_privleak import PrivacyLeakError

from pytest_privleak import assert_keyword_inference_at_most
from pytest_privleak.embeddings.corpora import medical_corpus
from pytest_privleak.embeddings.defences import subspace_projection

BODY_PARTS = ("leg", "hand")
BUDGET = dict(n_victims=300)    # 300 shared descriptions; the attacker's shadow corpus is 30 more (10 : 1, §VI-C)


@pytest.fixture(scope="module")
def encoder(privleak_minilm):
    """The plugin's all-MiniLM-L6-v2 (skips, naming the package to install, where it is absent)."""
    return privleak_minilm


@pytest.mark.xfail(raises=PrivacyLeakError, strict=True,
                   reason="raw MiniLM embeddings tell which body part a description names (paper §VI: >0.99 on Bert)")
def test_raw_embeddings_do_not_reveal_body_parts(encoder):
    assert_keyword_inference_at_most(encoder, BODY_PARTS, 0.6, name="raw minilm", **BUDGET)


def test_embeddings_with_the_body_part_subspace_projected_out_do_not_reveal_them(encoder, privleak_seed):
    """Subspace projection (§VII (4)) of 20 % of the dimensions (beta=0.2), fitted on 200 of our own descriptions
    (at beta=0.05 the attack still read 0.685)."""
    ours = medical_corpus(200, np.random.default_rng(privleak_seed + 100)).texts
    defended = subspace_projection(encoder, BODY_PARTS, ours, beta=0.2)
    assert_keyword_inference_at_most(defended, BODY_PARTS, 0.6, name="minilm, body parts projected out", **BUDGET)
