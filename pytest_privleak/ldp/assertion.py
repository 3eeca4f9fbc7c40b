"""``assert_ldp_holds``: fail when a mechanism provably leaks more than its claimed ε.

The verdict compares the black-box ε lower bound (``auditor.audit``, a
DP-Sniper-style attack with adaptive c) with the claim.  A lower bound above
the claim is a proof of violation at the stated confidence.  The bound is
the smallest over two independent replicates of the final estimate, so a
correct mechanism fails by bad luck with probability at most
(1 - confidence)^2 (0.25 % at the default 0.95), even when the attack's event
reaches the true ε exactly, as it does for OUE.
"""
from __future__ import annotations

import math

import numpy as np

from ..assertions import check
from ..results import LeakResult
from .auditor import AuditResult, audit
from .exact import pair_epsilon, worst_case_epsilon
from .mechanisms import FiniteDomain

_REMEDY = ("the mechanism's outputs on the witness pair differ more than e^ε allows: recalibrate its noise so "
           "that for every pair the largest log-ratio of output probabilities is at most ε (for bit-flip "
           "encoders: the sum over bits of the largest per-bit log-ratio, see the exact ε), or claim an ε at "
           "least as large as the exact one")


def _validate(mechanism, epsilon, confidence, samples, delta) -> float:
    eps = getattr(mechanism, "epsilon", None) if epsilon is None else epsilon
    try:
        eps = float(eps)
    except (TypeError, ValueError):
        raise ValueError(f"epsilon must be a number (the claimed ε), got {epsilon!r}") from None
    if not (eps > 0 and math.isfinite(eps)):
        raise ValueError(f"epsilon must be a positive finite claimed ε, got {epsilon!r}; pass e.g. epsilon=1.0")
    if not (isinstance(confidence, (int, float)) and 0.0 < confidence < 1.0):
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence!r}; e.g. confidence=0.95")
    if not (isinstance(samples, (int, np.integer)) and samples >= 1000):
        raise ValueError(f"samples must be an integer >= 1000 (outputs per input of the witness pair), got {samples!r}")
    if not (isinstance(delta, (int, float)) and 0.0 <= delta < 1.0):
        raise ValueError(f"delta must lie in [0, 1), got {delta!r}; use delta=0 for pure ε-LDP")
    for attr in ("domain",):
        if not hasattr(mechanism, attr) or not callable(mechanism):
            raise ValueError(f"{mechanism!r} is not a mechanism: it needs `epsilon`, `domain` and "
                             "`__call__(inputs, rng)` (see pytest_privleak.ldp.mechanisms)")
    return eps


def exact_figures(mechanism, found: AuditResult) -> dict[str, float]:
    """White-box figures for bit-product mechanisms: the witness pair's exact ε and the domain's worst case."""
    if not hasattr(mechanism, "bit_probabilities"):
        return {}
    out = {"exact_pair": pair_epsilon(mechanism, found.a, found.b)}
    if hasattr(mechanism, "coordinate_candidates") or (
            isinstance(mechanism.domain, FiniteDomain) and len(mechanism.domain.values) <= 4096):
        out["exact_eps"] = worst_case_epsilon(mechanism).epsilon
    return out


def ldp_result(mechanism, epsilon: float, found: AuditResult, *, delta: float = 0.0,
               tolerance: float | None = None) -> LeakResult:
    """Turn an audit into a :class:`LeakResult` (value = ε_lcb, threshold = claimed ε)."""
    exact = exact_figures(mechanism, found)
    point = found.point
    evidence = {
        "witness": f"a={found.a.tolist()} vs a'={found.b.tolist()}",
        "event": (f"Pr[M(a) in S] = {found.p1:.6g} (>= {found.p1_lower:.6g}), "
                  f"Pr[M(a') in S] = {found.p2:.6g} (<= {found.p2_upper:.6g})"),
        "samples": (f"{found.samples} per input, c = {found.c:.3g}, classifier {found.classifier}, "
                    f"smallest of {len(found.replicate_bounds)} replicate bounds "
                    f"({', '.join(f'{v:.4g}' for v in found.replicate_bounds)})"),
    }
    extra = {"p1": found.p1, "p1_lower": found.p1_lower, "p2": found.p2, "p2_upper": found.p2_upper}
    if math.isfinite(point):
        extra["point"] = point
    else:
        evidence["point"] = "inf (no output of a' fell in the event)"
    extra["ratio"] = found.epsilon_lcb / epsilon
    extra.update(exact)
    if "exact_eps" in exact:
        evidence["exact"] = (f"exact ε over the domain = {exact['exact_eps']:.4g}, of the witness pair = "
                             f"{exact['exact_pair']:.4g} (white-box, bit product)")
    return LeakResult(
        attack="ldp", metric="epsilon_lcb", value=float(found.epsilon_lcb), threshold=float(epsilon),
        direction="at_most", interval=(float(found.epsilon_lcb), math.inf), confidence=found.confidence,
        chance=0.0, ceiling=float(found.ceiling), label=repr(mechanism), evidence=evidence, extra=extra,
        remedy=_REMEDY, tolerance=tolerance, target={"mechanism": repr(mechanism), "samples": found.samples, "delta": delta,
                                "seconds": found.seconds, "pairs_tried": found.tried})


def assert_ldp_holds(mechanism, epsilon: float | None, *, confidence: float = 0.95, pairs=None,
                     samples: int = 1_000_000, delta: float = 0.0, seed: int = 0, c: float | None = None,
                     classifier: str = "logistic", train_samples: int = 20_000,
                     val_samples: int = 100_000, replicates: int = 2,
                     tolerance: float | None = None) -> LeakResult:
    """Fail when ``mechanism`` provably violates ``epsilon``-LDP (ε_lcb > epsilon at ``confidence``).

    ``pairs``: extra input pairs ``[(a, a'), ...]`` to try besides the search;
    ``samples``: outputs per input for each final estimate (the bound can reach
    about ln(samples / 3.7)); ``c``: fix Pr[M(a') in S] as DP-Sniper does
    (default: adaptive); ``epsilon=None`` takes the mechanism's own claim;
    ``replicates``: independent final estimates whose smallest bound is kept
    (1 = a single estimate, false-alarm rate up to 1 - confidence).
    The interval reported is the one-sided [ε_lcb, inf); ``ceiling`` is the
    largest ε_lcb that ``samples`` can certify.  ``tolerance``: how far ε_lcb
    may grow over the stored baseline report before the CI baseline gate
    calls it a regression (absolute, in ε; ``None`` uses the ini option or
    the built-in default of 0.1 for ``epsilon_lcb``); it does not affect this
    test's own pass/fail.
    """
    __tracebackhide__ = True
    eps = _validate(mechanism, epsilon, confidence, samples, delta)
    if c is not None and not (isinstance(c, (int, float)) and 0.0 < c < 1.0):
        raise ValueError(f"c must lie in (0, 1) or be None (adaptive), got {c!r}")
    if tolerance is not None and (isinstance(tolerance, bool) or not isinstance(tolerance, (int, float))
                                  or not (math.isfinite(tolerance) and tolerance >= 0)):
        raise ValueError(f"tolerance must be a finite number >= 0 (in ε) or None, got {tolerance!r}")
    found = audit(mechanism, confidence=confidence, pairs=pairs, samples=int(samples), delta=float(delta),
                  seed=seed, c=c, classifier=classifier, train_samples=train_samples, val_samples=val_samples,
                  replicates=replicates)
    result = ldp_result(mechanism, eps, found, delta=float(delta),
                        tolerance=None if tolerance is None else float(tolerance))
    return check(result)
