"""``assert_dp_training_holds``: fail when an audit proves the training pipeline breaks its (ε, δ)-DP claim.

The audit is :mod:`.dp_training` (canaries, one-run and distinguishing
bounds, black-box and white-box threat models).  The verdict compares the
proven lower bound ε_lcb (at ``confidence``) with the claimed ε: ε_lcb > ε
is a proof, at that confidence, that the claim is false.  An audit cut short
by ``time_budget_s`` that stays within the claim is inconclusive
(:class:`~pytest_privleak.attacks.inconclusive.InconclusiveAuditError`), not a
pass, unless ``allow_inconclusive=True``.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..results import LeakResult, audited
from .audit import (DEFAULT_RUNS, audit_dp_training, check_delta, check_epsilon, coverage,
                          default_label, dp_training_result)
from ..attacks.inconclusive import check_allow_inconclusive, check_covered

__all__ = ["assert_dp_training_holds"]


@audited
def assert_dp_training_holds(train, dataset, epsilon: float, delta: float, *, build, wrap=None,
                             method: str = "auto", canaries: Any = None,
                             canary_kind: str = "mislabelled", threat_model: str = "auto",
                             confidence: float = 0.95, runs: int = DEFAULT_RUNS, time_budget_s: float | None = None,
                             seed: int = 0, cache=None, config: dict | None = None, check_seed: bool = True,
                             name: str | None = None, allow_inconclusive: bool = False,
                             tolerance: float | None = None, sources: Sequence[str | Path] = ()) -> LeakResult:
    """Fail when the audit proves ε_lcb > ``epsilon`` for ``train(dataset, seed=..., **config)``.

    ``train``/``build`` follow ``train_own_model`` (trained once per content
    hash in ``cache``, the ``target_cache`` fixture); ``wrap(module)`` turns
    the trained module into a SequenceScorer for the black-box audit;
    a ``train`` taking ``audit_hook`` is also audited white-box (gradient
    canaries, :mod:`pytest_privleak.dp.gradient_canaries`).  ``method``:
    "auto" (one-run, plus distinguishing when its ``2 * runs`` trainings fit
    ``time_budget_s``, default 120 s), "one-run" or "distinguish". ``threat_model``: "auto"
    (every one the inputs allow), "black-box" or "white-box". ``canaries``:
    how many the one-run audit makes (None: 500 input, 2000 gradient canaries; or, black-box, your own Utterances,
    checked for collisions with the data); ``canary_kind``: "mislabelled"
    (classifiers) or "new-token" (language models). ``check_seed``: train a
    second seed once to refuse a train function that ignores its seed.
    ``tolerance``: how far ε_lcb may grow over the stored baseline (the CI
    gate), not this test's verdict. ``sources``: files or modules (a package:
    all its ``.py`` files) whose source joins each training's cache key.  A
    cached training is reused while its key is unchanged, and the key sees
    only the source of the package (or the lone module) that defines
    ``train``: if the DP code (the noise, the clipping, the sampler, the
    accountant) lives elsewhere, name it here, or a warm cache keeps
    certifying the weights of the old code.

    Refused with a ValueError rather than audited: a ``train`` taking
    ``audit_hook`` whose gradient canaries did not reach every optimizer step
    (the hook never called, or called with an optimizer whose step skips
    ``clip_and_accumulate``, as Opacus ghost clipping does); a ``train`` whose
    weights do not depend on the dataset it is given (so the black-box
    canaries never reach training). Returns the recorded result.
    """
    __tracebackhide__ = True
    eps, delta = check_epsilon(epsilon), check_delta(delta)
    allow = check_allow_inconclusive(allow_inconclusive)
    if tolerance is not None and (isinstance(tolerance, bool) or not isinstance(tolerance, (int, float))
                                  or not tolerance >= 0):
        raise ValueError(f"tolerance must be a number >= 0 or None, got {tolerance!r}")
    label = default_label(train, eps, delta, name)
    run = audit_dp_training(train, dataset, eps, delta, build=build, wrap=wrap, method=method, canaries=canaries,
                            canary_kind=canary_kind, threat_model=threat_model, confidence=confidence, runs=runs,
                            time_budget_s=time_budget_s, seed=seed, cache=cache, config=config,
                            check_seed=check_seed, sources=sources)
    result = dp_training_result(run, eps, delta, confidence, label=label, threshold=eps)
    result = dataclasses.replace(result, tolerance=None if tolerance is None else float(tolerance))
    covered, rest = coverage(run)
    return check_covered(result, complete=run.complete, covered=covered, rest=rest, allow_inconclusive=allow)
