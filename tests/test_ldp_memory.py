"""Bounded memory for wide mechanisms: outputs drawn and scored in chunks, scores in float32 (issue 12)."""
import subprocess
import sys
import textwrap
import tracemalloc

import numpy as np
import pytest

from pytest_privleak.ldp import OME
from pytest_privleak.ldp.auditor import _scores, candidate_pairs
from pytest_privleak.ldp.budget import AuditClock
from pytest_privleak.ldp.classifier import LinearScorer, train_rows
from pytest_privleak.ldp.sampling import CHUNK_ELEMENTS, draw_rows


def test_linear_scores_of_equal_bit_rows_are_exactly_equal_in_any_batch():
    rng = np.random.default_rng(0)
    w = rng.normal(size=3000) * rng.choice([1e-4, 1.0, 30.0], size=3000)
    scorer = LinearScorer(w, 0.37, np.ones(3000), "test")
    rows = (rng.random((50, 3000)) < 0.3).astype(np.uint8)
    batch = np.concatenate([rows, rows[::-1], rows[:7]])
    s = scorer(batch)
    assert np.array_equal(s[:50], s[50:100][::-1]) and np.array_equal(s[:7], s[100:])
    assert np.array_equal(scorer(rows[3:4]), s[3:4])
    exact = rows.astype(np.float64) @ w + 0.37
    # weights on a grid of `quantum` (2^-23 of the largest possible score): each active bit adds at most half a step
    assert np.all(np.abs(s[:50] - exact) <= rows.sum(1) * scorer.quantum / 2 + 1e-9)
    assert scorer.quantum <= np.abs(w).sum() * 2.0 ** -22


def test_float_outputs_are_scored_in_float32_within_its_resolution():
    rng = np.random.default_rng(1)
    w = rng.normal(size=8)
    out = rng.normal(size=(1000, 8)) * 30
    s = LinearScorer(w, 0.0, np.abs(out).max(0), "test")(out)
    ref = out @ w
    assert np.allclose(s, ref, rtol=0, atol=8 * 4 * np.spacing(np.float32(np.abs(out).max() * np.abs(w).max())))


def test_chunk_sizes_bound_memory_for_wide_outputs():
    assert draw_rows(10_000) * 10_000 <= CHUNK_ELEMENTS
    assert train_rows(20_000, 10_000) * 10_000 <= 1 << 23 and train_rows(20_000, 10) == 20_000


def _peak_mb(fn):
    tracemalloc.start()
    try:
        out = fn()
        return out, tracemalloc.get_traced_memory()[1] / 2 ** 20
    finally:
        tracemalloc.stop()


def test_probe_of_a_2000_bit_mechanism_keeps_memory_bounded():
    # before: the probe held 262 x 64 x 2000 outputs as float64 (270 MB) and the L1 distances in 540 MB blocks
    pairs, peak = _peak_mb(lambda: candidate_pairs(OME(100, 1.0, r=200), np.random.default_rng(0)))
    assert peak < 100, f"peak numpy memory {peak:.0f} MB"
    assert any(s == "widest" for _, _, s in pairs)


def test_validation_scores_of_a_5000_bit_mechanism_are_drawn_in_chunks():
    # before: 20,000 validation rows of 5000 bits were drawn at once and scored as float64 (100 MB + 800 MB)
    ome = OME(100, 1.0, r=500)
    scorer = LinearScorer(np.ones(5000), 0.0, np.ones(5000), "test")
    clock = AuditClock("test", progress=None)
    x = np.zeros(500)
    scores, peak = _peak_mb(lambda: _scores(ome, x, 20_000, scorer, np.random.default_rng(0), "test", clock, 5000))
    assert peak < 100, f"peak numpy memory {peak:.0f} MB"
    assert scores.shape == (20_000,) and clock.done == 20_000
    assert abs(scores.mean() - ome.bit_probabilities(x[None]).sum()) < 1.0


@pytest.mark.slow
def test_10000_bit_audit_stays_under_1_gb():
    code = textwrap.dedent("""
        import resource, torch
        torch.set_num_threads(1)
        from pytest_privleak.ldp import OME
from pytest_privleak.ldp.auditor import _scores, candidate_pairs
from pytest_privleak.ldp.budget import AuditClock
        res = audit(OME(100, 1.0, r=1000), progress=None)
        print(res.epsilon_lcb, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=3000)
    eps, peak_kb = out.stdout.split()
    assert float(eps) > 10 and int(peak_kb) < 2 ** 20, out.stdout
