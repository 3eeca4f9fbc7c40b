"""Checks of a mechanism that are warnings, not errors: its randomness must come from the ``rng`` given.

The auditor promises "same seed, same figures".  A mechanism that draws from
``np.random``, ``random`` or torch's global generator instead of the ``rng``
argument breaks that promise silently: its audit differs run to run, and a
gate can flap.  :func:`warn_if_irreproducible` runs the mechanism twice with
generators of the same seed and warns when the outputs differ.
"""
from __future__ import annotations

import warnings

import numpy as np


class LDPAuditWarning(UserWarning):
    """An LDP audit ran but something about it deserves attention (irreproducible mechanism, budget spent)."""


def warn_if_irreproducible(mechanism, inputs: np.ndarray, who: str, *, seed: int = 12345) -> bool:
    """Warn (:class:`LDPAuditWarning`) when two runs on ``inputs`` with same-seed generators differ."""
    one = np.asarray(mechanism(inputs, np.random.default_rng(seed)))
    two = np.asarray(mechanism(inputs, np.random.default_rng(seed)))
    same = one.shape == two.shape and bool(np.array_equal(one, two, equal_nan=one.dtype.kind in "fc"))
    if not same:
        warnings.warn(LDPAuditWarning(
            f"mechanism {who} gave different outputs in two runs with the same rng seed: it draws randomness "
            "outside the `rng` argument it is given (np.random.*, random, torch's global generator, a clock), so "
            "this audit's figures will not repeat from run to run and the gate can flap; fix: draw every random "
            "number from `rng` (a numpy.random.Generator), e.g. rng.random(shape) or rng.laplace(...)"),
            stacklevel=3)
    return same
