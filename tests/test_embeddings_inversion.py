"""Pattern reconstruction (privacy-risks-language-model-embeddings §V): maths by hand, then end to end on a tiny encoder."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")

from helpers_embeddings import tiny_encoder  # noqa: E402

from pytest_privleak.embeddings.inversion import _figure, invert_embeddings, positional_embedding  # noqa: E402
from pytest_privleak.embeddings.inversion_assertion import (assert_embedding_inversion_at_most,  # noqa: E402
                                                           measure_embedding_inversion)
from pytest_privleak.embeddings.patterns import CitizenIdPattern, GenomePattern  # noqa: E402
from pytest_privleak.results import set_sink  # noqa: E402
from pytest_privleak import expect_leak

BUDGET = dict(n_train=5000, n_victims=800, steps=800, seed=0)


class Constant:
    """An encoder whose embeddings say nothing: every text maps to the same vector."""

    def encode(self, texts):
        return np.ones((len(texts), 8), dtype=np.float32)


def test_citizen_ids_have_the_paper_format():
    p = CitizenIdPattern()
    s = p.sample(500, np.random.default_rng(1))
    assert all(len(t) == 18 and t.isdigit() for t in s.texts)
    for t, y, m, d in zip(s.texts, s.labels["year"], s.labels["month"], s.labels["day"]):
        assert t[6:10] == str(1920 + y) and t[10:12] == f"{m + 1:02d}" and t[12:14] == f"{d + 1:02d}"
    assert len({t[:6] for t in s.texts}) <= 3000
    prior = p.class_probabilities()
    assert prior["day"].sum() == pytest.approx(1.0, rel=1e-12)
    # day 1..28 occur in every month: 1/12 * sum over months of 1/len(month)
    lengths = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
    assert prior["day"][0] == pytest.approx(sum(1 / (12 * n) for n in lengths), rel=1e-12)
    assert prior["day"][30] == pytest.approx(7 / (12 * 31), rel=1e-12)


def test_genome_texts_are_twenty_nucleotides():
    s = GenomePattern().sample(50, np.random.default_rng(2))
    assert all(len(t) == 20 and set(t) <= set("ACGT") for t in s.texts)
    assert "".join("ACGT"[s.labels[f"position {i}"][0]] for i in range(1, 21)) == s.texts[0]


def test_positional_embedding_by_hand():
    p = positional_embedding(torch.tensor([3]), 4)[0]
    expected = [math.sin(3 / 10000 ** 0), math.cos(3 / 10000 ** 0.25), math.sin(3 / 10000 ** 0.5),
                math.cos(3 / 10000 ** 0.75)]
    np.testing.assert_allclose(p.numpy(), expected, rtol=1e-6)


def test_top1_top5_and_chance_by_hand():
    logits = torch.tensor([[9.0, 8, 7, 6, 5, 4, 0], [0, 1, 2, 3, 4, 5, 9], [9, 0, 0, 0, 0, 0, 1]])
    prior = np.array([0.4, 0.2, 0.1, 0.1, 0.1, 0.05, 0.05])
    f = _figure("x", logits, np.array([0, 1, 5]), prior, 0.95)
    assert (f.hits1, f.hits5, f.n) == (1, 2, 3)          # row 0 top-1; row 1 has class 1 at rank 6; row 2 rank 2
    assert f.chance1 == pytest.approx(0.4) and f.chance5 == pytest.approx(0.9)
    assert f.interval1[0] < 1 / 3 < f.interval1[1]


@pytest.fixture(scope="module")
def tiny():
    torch.set_num_threads(1)
    return tiny_encoder(seed=0)


def test_the_birth_year_leaks_from_the_tiny_encoder_far_above_chance(tiny):
    """CI stand-in of the MiniLM slow test: a random tiny BERT keeps which digit sits where."""
    sink: list = []
    set_sink(sink)
    try:
        with expect_leak() as failure:
            assert_embedding_inversion_at_most(tiny, "citizen-id", max_top1=0.02, sub_attacks=("year",),
                                               name="tiny citizen year", **BUDGET)
    finally:
        set_sink(None)
    result = failure.value.result
    assert result.metric == "top1_year" and result.chance == pytest.approx(0.01)
    assert result.interval[0] > 0.03, result.explain()   # the lower bound is 3x chance
    message = str(failure.value)
    for part in ("figure", "CI", "threshold", "chance", "born ", "remedy", "laplace_noise", "MLP sub-attacks"):
        assert part in message
    assert [r.label for r in sink] == ["tiny citizen year"]


def test_an_encoder_that_says_nothing_passes_at_chance():
    results = assert_embedding_inversion_at_most(Constant(), "citizen-id", max_top1=0.15, n_train=1000,
                                                 n_victims=800, steps=200)
    by = {r.metric: r for r in results}
    assert set(by) == {"top1_year", "top1_month", "top1_day"}
    for r in results:
        assert r.interval[0] <= r.chance <= r.interval[1] + 0.02, r.explain()


def test_measure_records_without_gating_and_the_genome_attack_beats_chance(tiny):
    sink: list = []
    set_sink(sink)
    try:
        results = measure_embedding_inversion(tiny, "genome", n_train=2000, n_victims=200, steps=400)
    finally:
        set_sink(None)
    (r,) = results
    assert r.verdict == "measured" and sink == results
    assert r.chance == pytest.approx(0.25) and r.interval[0] > 0.28, r.explain()
    assert "per position" in r.evidence and r.label.startswith("BertModel")


def test_a_fixed_seed_gives_the_same_figures_twice(tiny):
    a = invert_embeddings(tiny, "citizen-id", n_train=1000, n_victims=200, steps=100, sub_attacks="month")
    b = invert_embeddings(tiny, "citizen-id", n_train=1000, n_victims=200, steps=100, sub_attacks="month")
    assert [(f.hits1, f.hits5) for f in a.figures] == [(f.hits1, f.hits5) for f in b.figures]


def test_sub_attacks_trained_together_learn_what_each_learns_alone():
    """The year, month and day models share the mini-batches but no parameter: each ends where it ends alone."""
    from pytest_privleak.embeddings.inversion import train_sub_attacks
    from pytest_privleak.embeddings.training import mlp

    g = torch.Generator().manual_seed(3)
    x = torch.randn(300, 6, generator=g)
    labels = [torch.randint(0, k, (300,), generator=g) for k in (5, 3)]
    together = [mlp(6, (8,), 5, seed=1), mlp(6, (4,), 3, seed=2)]
    alone = [mlp(6, (8,), 5, seed=1), mlp(6, (4,), 3, seed=2)]
    train_sub_attacks(together, x, labels, steps=40, seed=7)
    for net, y in zip(alone, labels):
        train_sub_attacks([net], x, [y], steps=40, seed=7)
    for a, b in zip(together, alone):
        for p, q in zip(a.parameters(), b.parameters()):
            torch.testing.assert_close(p, q, rtol=1e-6, atol=1e-7)
    assert not any(m.training for m in together)
