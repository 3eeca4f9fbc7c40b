"""The §VII defences as wrapped encoders: maths by hand, then each moves the §V attack toward chance (utility printed)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")

from helpers_embeddings import tiny_encoder  # noqa: E402

from pytest_privleak.embeddings.defences import (Rounded, estimate_l1_sensitivity, laplace_noise,  # noqa: E402
                                                 rounded, subspace_projection)
from pytest_privleak.embeddings.inversion import invert_embeddings  # noqa: E402
from pytest_privleak.embeddings.patterns import CitizenIdPattern  # noqa: E402
from pytest_privleak.embeddings.utility import measure_utility  # noqa: E402

ATTACK = dict(n_train=3000, n_victims=2000, steps=400, sub_attacks=("month",))
UTILITY = dict(n_train=400, n_test=300, steps=300)


class Table:
    """A stub encoder: each text maps to a fixed vector (by hand), texts not listed to zeros."""

    def __init__(self, rows: dict[str, list[float]]) -> None:
        self.rows = rows
        self.dim = len(next(iter(rows.values())))

    def encode(self, texts):
        return np.array([self.rows.get(t, [0.0] * self.dim) for t in texts], dtype=np.float32)


def test_rounding_by_hand():
    enc = rounded(Table({"a": [0.123, -1.55, 2.0]}), 1)
    np.testing.assert_array_equal(enc.encode(["a"]), np.array([[0.1, -1.6, 2.0]], dtype=np.float32))
    assert enc.title() == "rounding(decimals=1)"


def test_laplace_noise_has_the_scale_sensitivity_over_epsilon():
    enc = laplace_noise(Table({"a": [0.0] * 4}), epsilon=2.0, sensitivity=3.0, seed=1)
    noise = enc.encode(["a"] * 20000)
    # |Lap(0, b)| has mean b = 3 / 2; 80000 draws: standard error 1.5 / sqrt(80000) ~ 0.005
    assert abs(np.abs(noise).mean() - 1.5) < 0.03
    again = laplace_noise(Table({"a": [0.0] * 4}), epsilon=2.0, sensitivity=3.0, seed=1).encode(["a"] * 20000)
    np.testing.assert_array_equal(noise, again)


def test_sensitivity_is_the_largest_l1_change_of_one_word():
    table = Table({"x a": [0, 0], "x b": [1, -2], "y a": [0, 0.5]})
    # one-word changes of "x a" and "y b" (vocabulary a, b, x, y) move the embedding by l1 0, 0.5 or 3 ("x b")
    assert estimate_l1_sensitivity(table, ["x a", "y b"], pairs=400, seed=0) == pytest.approx(3.0, rel=1e-6)


class Additive:
    """A stub encoder: the sum of fixed word vectors."""

    vectors = {"arm": [1.0, 0.0, 0.0], "hip": [0.0, 1.0, 0.0], "leg": [0.0, 0.0, 3.0]}

    def encode(self, texts):
        return np.array([np.sum([self.vectors[w] for w in t.split()], axis=0) for t in texts], dtype=np.float32)


def test_subspace_projection_removes_the_keyword_direction_by_hand():
    # one defining pair: "arm hip" and its twin with one word swapped for "leg" ("leg hip" or "arm leg")
    enc = subspace_projection(Additive(), ["leg"], ["arm hip"], beta=0.2)
    u = enc.basis[:, 0]
    candidates = {"leg hip": np.array([-1.0, 0.0, 3.0]), "arm leg": np.array([0.0, -1.0, 3.0])}
    twin = next(t for t, d in candidates.items() if abs(abs(u @ d) / np.linalg.norm(d) - 1) < 1e-9)
    out = enc.encode([twin, "arm hip"])
    np.testing.assert_allclose(out[0], out[1], rtol=1e-6)        # with and without the keyword look the same
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(out @ u, 0.0, atol=1e-6)      # float32 output: resolution ~6e-8 near 1


@pytest.fixture(scope="module")
def tiny():
    torch.set_num_threads(1)
    return tiny_encoder(seed=0)


@pytest.fixture(scope="module")
def undefended(tiny):
    figure = invert_embeddings(tiny, "citizen-id", **ATTACK).figures[0]
    return figure, measure_utility(tiny, **UTILITY)


def _move_toward_chance(defended, undefended, label):
    raw, raw_utility = undefended
    figure = invert_embeddings(defended, "citizen-id", **ATTACK).figures[0]
    utility = measure_utility(defended, **UTILITY)
    print(f"\n{label}: month top-1 {raw.top1:.3f} -> {figure.top1:.3f} (chance {figure.chance1:.3f}); "
          f"utility {raw_utility.accuracy:.3f} -> {utility.accuracy:.3f} (cost {raw_utility.accuracy - utility.accuracy:+.3f})")
    assert raw.interval1[0] > raw.chance1 + 0.05                  # the raw encoder leaks the month
    assert figure.top1 - figure.chance1 < 0.6 * (raw.top1 - raw.chance1)
    return figure, utility


def test_rounding_to_integers_moves_the_month_attack_toward_chance(tiny, undefended):
    _move_toward_chance(Rounded(tiny, 0), undefended, "rounding r=0")


def test_laplace_noise_moves_the_month_attack_to_chance(tiny, undefended):
    ids = CitizenIdPattern().sample(1000, np.random.default_rng(5)).texts
    defended = laplace_noise(tiny, epsilon=1.0, texts=ids, pairs=1000)
    figure, utility = _move_toward_chance(defended, undefended, f"laplace eps=1 (sensitivity {defended.sensitivity:.2f})")
    assert figure.interval1[0] <= figure.chance1                    # indistinguishable from chance
