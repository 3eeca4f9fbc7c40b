"""``measure_dp_sampling`` / ``assert_dp_sampling_holds``: does the loop sample and normalise as its accountant
assumes?  (issue 32, item 4; the tests are :mod:`.sampling`.)

``train(dataset, seed=..., **config, audit_hook=...)`` is run once (through
the target cache, like the DP-SGD audit's trainings) with an audit hook that
inserts no canary and records which records each step used
(``audit_hook.watch_loader(loader)`` or ``audit_hook.record_batch``) and, when
the loop also follows the white-box contract (``audit_hook(optimizer,
sample_rate=q)`` or ``audit_hook.attach``), each step's noise scale.  With
``neighbours=True`` it is run again on the data less its last record and on
the data plus a copy of its first, to see whether the normaliser moves with
the dataset size.  The accounted q is the ``sample_rate`` the loop told the
hook.

The figure is the smallest Bonferroni-adjusted p-value of the properties
tested; the assertion fails when it is at most 1 - ``confidence`` (default
0.999: the tests are exact, so a correct loader is flagged at most 0.1 % of
the time, and the broken samplers of issue 32 give p-values far below),
naming the property and the accounted against the measured q.  A correct
Poisson loader gives p-values uniform on (0, 1).
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..results import LeakResult, PrivacyLeakError, audited, record

__all__ = ["measure_dp_sampling", "assert_dp_sampling_holds", "audit_dp_sampling", "SAMPLING_REMEDY"]

SAMPLING_REMEDY = ("sample each step's batch by Poisson sampling, each record independently with the accountant's "
                   "q (Opacus: make_private(..., poisson_sampling=True) and no sampler of your own; a plain loop: "
                   "torch.rand(N) < q), or account for the sampler you use (shuffled fixed-size batches: opacus 80, "
                   "Annamalai et al. 2024; a WeightedRandomSampler breaks equal inclusion: opacus 813, 600); scale "
                   "the noisy sum by a constant fixed before training, not by the batch's size (opacus 571) nor by "
                   "int(N * q), which moves with the dataset size (opacus 819)")


def _check_confidence(confidence) -> float:
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be a number in (0, 1), got {confidence!r}; fix: e.g. confidence=0.95")
    return float(confidence)


def _run(trainer, dataset, seed: int):
    from .gradient_canaries import AuditHook

    trained = trainer.run(dataset, seed, AuditHook((), seed=seed), white_box=False)
    tally = trained.tally
    if not tally.batches:
        raise ValueError(f"train={trainer.name!r} did not report its batches to audit_hook, so its sampling cannot "
                         "be audited; fix: loader = audit_hook.watch_loader(loader) before the training loop, or "
                         "audit_hook.record_batch(indices, population=N) at every step")
    if not tally.sample_rate:
        raise ValueError(f"train={trainer.name!r} reported its batches but not the sampling rate its accountant "
                         "uses; fix: audit_hook.watch_loader(loader, sample_rate=q), or call audit_hook(optimizer, "
                         "sample_rate=q) / audit_hook.attach(model, sample_rate=q, max_grad_norm=C)")
    return tally


def audit_dp_sampling(train, dataset, *, build, config: dict | None = None, seed: int = 0,
                      neighbours: bool = True, cache=None, sources: Sequence[str | Path] = ()):
    """Train and test (see the module docstring); returns ``(properties, tally, facts)``."""
    from .audit import _Trainer, check_sources
    from .sampling import neighbour_normalisation, sampling_properties, within_run_normalisation

    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
    if config is not None and not isinstance(config, dict):
        raise TypeError(f"config must be a dict of keyword arguments for train, got {type(config).__name__}")
    if config and "audit_hook" in config:
        raise ValueError("config must not hold audit_hook: the sampling audit passes its own")
    trainer = _Trainer(train, build, None, cache, dict(config or {}), check_sources(sources))
    tally = _run(trainer, dataset, seed)
    q, population = tally.sample_rate, tally.population
    properties = sampling_properties(tally.batches, population, q)
    coordinates = int(sum(int(np.prod(shape)) for shape in tally.shapes))
    properties.append(within_run_normalisation(tally.rows, tally.noise_rms, coordinates))
    if neighbours and coordinates and hasattr(dataset, "with_train"):
        runs = {"the data": (tally.noise_rms, population)}
        split = tuple(dataset.train)
        for label, data in (("one record removed", dataset.with_train(split[:-1], name=f"{dataset.name} - 1")),
                            ("one record added", dataset.with_train(split + split[:1], name=f"{dataset.name} + 1"))):
            other = _run(trainer, data, seed)
            runs[label] = (other.noise_rms, other.population)
        properties.append(neighbour_normalisation(runs, coordinates, q * population))
    facts = {"accounted q": q, "measured q": sum(len(b) for b in tally.batches) / (population * len(tally.batches)),
             "steps": len(tally.batches), "records": population}
    return properties, tally, facts


def _result(properties, facts, confidence: float, *, label: str, threshold: float | None) -> LeakResult:
    tested = [p for p in properties if p.p_value is not None]
    k = max(1, len(tested))
    adjusted = {p.name: min(1.0, p.p_value * k) for p in tested}
    level = 1.0 - confidence
    figure = min(adjusted.values()) if adjusted else 1.0
    failed = [name for name, p in adjusted.items() if p <= level]
    evidence = {"accounted q": f"{facts['accounted q']:.4g}",
                "measured q": f"{facts['measured q']:.4g} over {facts['steps']} steps of {facts['records']} records",
                "properties": f"{len(tested)} tested, each p-value x{k} (Bonferroni); failed: "
                              f"{', '.join(failed) if failed else 'none'}"}
    for p in properties:
        shown = "not tested" if p.p_value is None else \
            f"{'FAIL' if adjusted[p.name] <= level else 'ok'} (p = {adjusted[p.name]:.3g})"
        evidence[p.name] = f"{shown}: {p.measured}"
    extra = {"accounted_q": float(facts["accounted q"]), "measured_q": float(facts["measured q"]),
             "steps": float(facts["steps"])}
    return LeakResult(attack="dp-sampling", metric="p_value", value=figure, threshold=threshold,
                      direction="at_least", interval=None, confidence=confidence, chance=0.5, label=label,
                      evidence=evidence, extra=extra, remedy=SAMPLING_REMEDY,
                      target={"sampler": "failed: " + ", ".join(failed) if failed else "as accounted"})


def _label(train, name: str | None) -> str:
    from .audit import checked_name

    if checked_name(name, "intent classifier sampler") is not None:
        return name
    return f"{getattr(train, '__qualname__', 'train')} sampling"


@audited
def measure_dp_sampling(train, dataset, *, build, config: dict | None = None, seed: int = 0,
                        confidence: float = 0.999, neighbours: bool = True, cache=None, name: str | None = None,
                        sources: Sequence[str | Path] = ()) -> LeakResult:
    """The smallest Bonferroni-adjusted p-value of the sampling and normalisation tests (recorded,
    ``threshold=None``); arguments as :func:`assert_dp_sampling_holds`."""
    confidence = _check_confidence(confidence)
    label = _label(train, name)
    properties, _, facts = audit_dp_sampling(train, dataset, build=build, config=config, seed=seed,
                                             neighbours=neighbours, cache=cache, sources=sources)
    return record(_result(properties, facts, confidence, label=label, threshold=None))


@audited
def assert_dp_sampling_holds(train, dataset, *, build, config: dict | None = None, seed: int = 0,
                             confidence: float = 0.999, neighbours: bool = True, cache=None, name: str | None = None,
                             sources: Sequence[str | Path] = ()) -> LeakResult:
    """Fail when ``train`` does not sample (or normalise) as the subsampled Gaussian accountant assumes.

    ``train(dataset, seed=..., **config, audit_hook=...)`` must report its
    batches (``loader = audit_hook.watch_loader(loader)``, or
    ``audit_hook.record_batch(indices, population=N)`` per step) and the rate
    its accountant was told (``audit_hook(optimizer, sample_rate=q)``,
    ``audit_hook.attach(model, sample_rate=q, max_grad_norm=C)`` or
    ``watch_loader(loader, sample_rate=q)``); with the white-box contract the
    normaliser is tested too.  ``neighbours``: also train on the data less one
    record and plus one (two more trainings) to test that the normaliser does
    not move with the dataset size.  Exact tests, Bonferroni over them, at
    ``confidence`` (0.999: a gate must not flap; at 0.95 a correct loader fails
    about 3 % of runs).  Returns the recorded result.
    """
    __tracebackhide__ = True
    confidence = _check_confidence(confidence)
    label = _label(train, name)
    properties, _, facts = audit_dp_sampling(train, dataset, build=build, config=config, seed=seed,
                                             neighbours=neighbours, cache=cache, sources=sources)
    result = record(_result(properties, facts, confidence, label=label, threshold=1.0 - confidence))
    if not result.passed:
        raise PrivacyLeakError(result)
    return result

