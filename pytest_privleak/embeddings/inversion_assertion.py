"""``measure_embedding_inversion`` and ``assert_embedding_inversion_at_most``: §V pattern reconstruction as a gate.

One :class:`LeakResult` per sub-attack (``top1_year``, ``top1_month``,
``top1_day`` for Citizen ID; ``top1_nucleotide`` pooled over the 20 positions
for Genome), each with its Clopper-Pearson interval and chance baseline; the
top-5 figure is in ``extra`` (and gated too when ``max_top5`` is given).
"""
from __future__ import annotations

import dataclasses

from typing import Any

from ..results import LeakResult, record, audited
from .defence_costs import cost_summary
from .describe import check_name, check_tolerance, encoder_facts, encoder_label
from .inversion import (DEFAULT_N_TRAIN, DEFAULT_STEPS, InversionMeasurement, SubAttackFigure,
                        check_sub_attacks, invert_embeddings)
from .patterns import get_pattern

ATTACK = "embedding-inversion"
REMEDY = ("the embeddings give the secret part of the text away (privacy-risks-language-model-embeddings §V): do not "
          "share raw embeddings of texts holding IDs or sequences; mask the secret span before encoding; or wrap the "
          "encoder in a defence of §VII (pytest_privleak.embeddings.defences: rounded, laplace_noise, "
          "privacy_preserving_mapping, subspace_projection), each costing downstream utility, and re-run this "
          "assertion on the wrapped encoder; measure your encoder's cost with measure_utility(wrapped)")


def remedy() -> str:
    """The remedy with each defence's measured effect on the §V month sub-attack and its utility cost."""
    return f"{REMEDY}. Defence costs {cost_summary('month')}"


def _rate(x: Any, name: str) -> float | None:
    __tracebackhide__ = True   # a usage error shows at the caller's line
    if x is None:
        return None
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not 0.0 <= float(x) <= 1.0:
        raise ValueError(f"{name} must be an accuracy in [0, 1], got {x!r}; fix: e.g. {name}=0.05 (Citizen-ID year "
                         "chance is 0.01, month 0.083)")
    return float(x)


def _results(encoder: Any, m: InversionMeasurement, *, with_top5: bool, name: str | None) -> list[LeakResult]:
    """The measured results (``threshold=None``): top-1 per sub-attack, and top-5 ones when ``with_top5``."""
    label = name if name is not None else encoder_label(encoder, f"{m.pattern}, {m.n_victims} victims")
    facts = encoder_facts(encoder)
    common = {"attack": f"MLP sub-attacks on generated samples (§V-B), {m.n_train} training texts, {m.steps} steps "
                        "of batch 128", "examples": "; ".join(m.examples)}
    if m.per_position:
        common["per position"] = ", ".join(f"{k.split()[-1]}: {v:.2f}" for k, v in m.per_position.items())
    out, text = [], remedy()
    for f in m.figures:
        extra = {f"top5_{f.name}": f.top5, "top5_chance": f.chance5, **m.extra} if f.chance5 < 1 else dict(m.extra)
        extra.update(successes=float(f.hits1), trials=float(f.n))   # counts: pooled over seeds (Clopper-Pearson)
        evidence = {**common, "recovered": f"{f.hits1} of {f.n} {f.name}s exactly (top-1), {f.hits5} in the top 5"
                    if f.chance5 < 1 else f"{f.hits1} of {f.n} nucleotides (victims x positions)"}
        out.append(LeakResult(attack=ATTACK, metric=f"top1_{f.name}", value=f.top1, threshold=None,
                              direction="at_most", interval=f.interval1, confidence=m.confidence, chance=f.chance1,
                              ceiling=1.0, label=label, evidence=evidence, extra=extra, remedy=text,
                              target=facts))
        if with_top5 and f.chance5 < 1:
            out.append(LeakResult(attack=ATTACK, metric=f"top5_{f.name}", value=f.top5, threshold=None,
                                  direction="at_most", interval=f.interval5, confidence=m.confidence,
                                  chance=f.chance5, ceiling=1.0, label=label, evidence=evidence,
                                  extra={f"top1_{f.name}": f.top1, "successes": float(f.hits5),
                                         "trials": float(f.n)}, remedy=text, target=facts))
    return out


def measured_inversion(encoder: Any, pattern: Any, *, n_train: int, n_victims: int, steps: int, seed: int,
                       confidence: float, sub_attacks: Any, name: str | None, with_top5: bool) -> list[LeakResult]:
    """The measured results: from the result cache when ``encoder`` has a content hash and the same call ran
    before (:mod:`pytest_privleak.cache.results`), else computed."""
    from ..cache.results import cached_results

    inputs = {"pattern": pattern, "n_train": n_train, "n_victims": n_victims, "steps": steps, "seed": seed,
              "confidence": confidence, "sub_attacks": sub_attacks, "name": name, "with_top5": with_top5}

    def compute() -> list[LeakResult]:
        m = invert_embeddings(encoder, pattern, n_train=n_train, n_victims=n_victims, steps=steps, seed=seed,
                              confidence=confidence, sub_attacks=sub_attacks)
        return _results(encoder, m, with_top5=with_top5, name=name)

    return cached_results(ATTACK, [encoder], inputs, compute)


def _check_limits(pattern: Any, subs: tuple[str, ...], max_top1: float | None, max_top5: float | None) -> None:
    __tracebackhide__ = True   # a usage error shows at the caller's line
    prior = pattern.class_probabilities()
    for sub, p in prior.items():
        if subs and sub not in subs:
            continue
        for limit, k, arg in ((max_top1, 1, "max_top1"), (max_top5, 5, "max_top5")):
            chance = float(sum(sorted(p, reverse=True)[:k]))
            if limit is not None and limit < chance - 1e-12 and len(p) > k:
                raise ValueError(f"{arg}={limit:g} is below the chance of the {sub} sub-attack ({chance:.3f}: a "
                                 "guesser who knows the format reaches it without any embedding), so the gate "
                                 f"would fail on every encoder; fix: {arg} >= {chance:.3f}, e.g. chance plus a margin")


@audited
def measure_embedding_inversion(encoder: Any, pattern: Any = "citizen-id", *, n_train: int = DEFAULT_N_TRAIN,
                                n_victims: int = 1000, steps: int = DEFAULT_STEPS, seed: int = 0,
                                confidence: float = 0.95, sub_attacks: Any = None,
                                name: str | None = None) -> list[LeakResult]:
    """Measure the §V attack (top-1 per sub-attack, top-5 in ``extra``) without gating; results are recorded."""
    check_name(name)
    measured = measured_inversion(encoder, get_pattern(pattern), n_train=n_train, n_victims=n_victims, steps=steps,
                                  seed=seed, confidence=confidence, sub_attacks=sub_attacks, name=name,
                                  with_top5=False)
    return [record(r) for r in measured]


@audited
def assert_embedding_inversion_at_most(encoder: Any, pattern: Any = "citizen-id", *, max_top1: float,
                                       max_top5: float | None = None, n_train: int = DEFAULT_N_TRAIN,
                                       n_victims: int = 1000, steps: int = DEFAULT_STEPS, seed: int = 0,
                                       confidence: float = 0.95, sub_attacks: Any = None, name: str | None = None,
                                       tolerance: float | None = None) -> list[LeakResult]:
    """Fail when any sub-attack of §V reads the secret from ``encoder``'s embeddings above ``max_top1``.

    ``pattern``: ``"citizen-id"`` (year, month, day of the birth date in an
    18-digit ID; chance 0.01, 0.083, ~0.035) or ``"genome"`` (the nucleotide
    at any of 20 positions; chance 0.25). ``sub_attacks``: a subset of
    the Citizen-ID sub-attacks (e.g. ``("year",)``). ``max_top5``: also gate the top-5
    accuracy. Each sub-attack's top-1 accuracy is compared with the limit;
    its Clopper-Pearson interval and chance are printed. The attack is the
    paper's (the only one: no exhaustive search fits 10^18 IDs). Its budget:
    ``n_train`` generated texts encoded once, ``steps`` iterations of batch
    128 (§V-D trains 100,000 iterations of fresh samples); the defaults (80,000
    and 16,000) are the smallest measured to reach the paper's Table II range on
    all-MiniLM-L6-v2 (year top-1 0.468; 20,000 IDs stop at 0.34), and more of
    either only makes the attack stronger. Returns the recorded
    results (all are recorded; the worst failing one is raised).
    """
    __tracebackhide__ = True
    from ..assertions import check

    pattern = get_pattern(pattern)
    top1, top5 = _rate(max_top1, "max_top1"), _rate(max_top5, "max_top5")
    if top1 is None:
        raise ValueError("max_top1 must be an accuracy in [0, 1], got None; fix: e.g. max_top1=0.05")
    subs = check_sub_attacks(pattern, sub_attacks)
    _check_limits(pattern, subs, top1, top5)
    check_name(name)
    tolerance = check_tolerance(tolerance)
    measured = measured_inversion(encoder, pattern, n_train=n_train, n_victims=n_victims, steps=steps, seed=seed,
                                  confidence=confidence, sub_attacks=subs or None, name=name,
                                  with_top5=top5 is not None)
    results = [dataclasses.replace(r, threshold=top1 if r.metric.startswith("top1_") else top5, tolerance=tolerance)
               for r in measured]
    failing = sorted((r for r in results if not r.passed), key=lambda r: r.threshold - r.value)
    for r in results:
        if not failing or r is not failing[0]:
            record(r)
    if failing:
        check(failing[0])
    return results


__all__ = ["measure_embedding_inversion", "assert_embedding_inversion_at_most", "SubAttackFigure"]
