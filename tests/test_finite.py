"""``require_finite``: the one non-finite check every attack runs on what a model returned."""
import math

import numpy as np
import pytest
import torch

from pytest_privleak.finite import NonFiniteError, require_finite


@pytest.mark.parametrize("values", [1.0, 0, np.array([0.5, -3.0]), torch.tensor([[1.0, 2.0]]),
                                    np.array([1, 2], dtype=np.int64), torch.tensor([3, 4])])
def test_finite_values_pass(values):
    require_finite(values, what="scores", fix="none needed")


@pytest.mark.parametrize("values", [math.nan, math.inf, np.array([0.1, np.nan, np.inf]),
                                    torch.tensor([1.0, float("nan")]), torch.tensor([-float("inf")], dtype=torch.bfloat16),
                                    np.array([1.0, None], dtype=object)])
def test_non_finite_values_fail_naming_the_source_and_the_fix(values):
    with pytest.raises(NonFiniteError, match=r"the model's loss: \d+ of \d+ value\(s\) are NaN or infinite.*Fix: retrain"):
        require_finite(values, what="the model's loss", fix="retrain it")


def test_counts_every_bad_value():
    with pytest.raises(NonFiniteError, match="2 of 4"):
        require_finite(np.array([np.nan, 1.0, np.inf, 2.0]), what="x", fix="y")


def test_is_a_value_error():
    assert issubclass(NonFiniteError, ValueError)
