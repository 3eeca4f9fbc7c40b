"""d-exposure figures as results: ``measure_d_exposure`` / ``assert_d_exposure_below``.

The maths is :mod:`.d_exposure` (d-exposure-discriminative §3.1, eqs. 2-3);
this module turns it into a recorded :class:`~pytest_privleak.results.LeakResult`.

* ``per_class=True`` (the default) gates every class: the figure is the
  highest eq. 2 value over the classes, and the message names that class.
  The paper's eq. 3 (the mean over classes) stays in ``extra`` as
  ``d_exposure_mean``; ``per_class=False`` gates that mean instead.  The mean
  dilutes a leak in one class (issue 27: LOC 3.01, PER 5.28, ORG 2.80 average
  to 3.70, which passes a 5-bit limit that PER exceeds), so a gate takes the
  highest.
* ``class_words`` is each class's words ``W_i``, or the training dataset to
  take them from by ``class_word_rule`` (``"paper"``: the paper's rule,
  :func:`.d_exposure.paper_class_words`; ``"exclusive"``: the stricter one).
* ``epochs=[25, 50]`` measures the target at those epochs of its training
  (a target trained with ``checkpoints``; ``target.at_epoch(e)``) and gives
  one result per epoch, the rows of the paper's Table 3
  (:func:`table3` lays them out).

A target from ``train_target`` measured the same way before is not attacked
again: the result comes from the result cache (:mod:`pytest_privleak.cache.results`).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from ...cache.results import cached_results
from ...results import LeakResult, record, audited
from .discriminative import DEFAULT_TEMPLATE, DExposure, class_words as words_by_rule, d_exposure
from ...results import target_facts
from .assertion import _check_bits, _check_name, _check_tolerance
from ..remedies import UNKNOWN, remedy, remedy_for

#: The remedy for a tagger of no known family; the result carries the one for the attacked model's.
D_EXPOSURE_REMEDY = remedy("d-exposure", UNKNOWN)
#: The metric of each gate: eq. 3's mean over classes, or the highest class.
MEAN_METRIC = "d_exposure_bits"
CLASS_MAX_METRIC = "d_exposure_class_max_bits"


def _resolve_words(class_words: Any, inserted: Any, rule: str) -> Mapping[str, Sequence[str]]:
    if isinstance(class_words, Mapping):
        return class_words
    if hasattr(class_words, "train"):
        return words_by_rule(class_words, list(inserted) if isinstance(inserted, Mapping) else [], rule)
    raise TypeError(f"class_words must map each class to its words or be the training dataset, got "
                    f"{type(class_words).__name__}; fix: class_words={{'PER': ['Ann', 'Bob']}} or "
                    "class_words=dataset")


def _check_flag(name: str, value: Any) -> bool:
    __tracebackhide__ = True   # a usage error shows at the caller's line
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {value!r}; fix: {name}=True (gate every class) or "
                        f"{name}=False (gate the paper's mean over classes, eq. 3)")
    return value


def _check_epochs(epochs: Any) -> tuple[int, ...] | None:
    __tracebackhide__ = True   # a usage error shows at the caller's line
    if epochs is None:
        return None
    bad = (isinstance(epochs, (str, bytes)) or not hasattr(epochs, "__iter__")
           or not list(epochs) or any(not isinstance(e, int) or isinstance(e, bool) or e < 1 for e in epochs))
    if bad:
        raise ValueError(f"epochs must be a non-empty list of epochs (integers >= 1), got {epochs!r}; fix: e.g. "
                         "epochs=[25, 50] with a target trained with checkpoints=[25] and epochs=50")
    return tuple(epochs)


def _at_epoch(target: Any, epoch: int) -> Any:
    at = getattr(target, "at_epoch", None)
    if not callable(at):
        raise TypeError(f"epochs= needs a target that keeps its weights per epoch ({type(target).__name__} has no "
                        "at_epoch); fix: train_target('ner-bilstm-crf', data, epochs=E, checkpoints=[...])")
    return at(epoch)


def _class_line(per) -> str:
    ties = f", {per.ties} of them tied at float resolution" if per.at_least else ""
    return (f"{per.value:.2f} bits; conf({per.word})={per.confidence:.6g} (1 - conf = exp({per.log_complement:.2f})), "
            f"predicted {per.predicted}, {per.at_least} of {per.n_words} class words at least as confident{ties}")


def d_exposure_result(target: Any, inserted: Mapping[str, str], *, class_words: Mapping[str, Sequence[str]] | Any,
                      template: Sequence[str] | str | None, threshold: float | None,
                      tolerance: float | None = None, name: str | None = None, per_class: bool = True,
                      class_word_rule: str = "paper") -> LeakResult:
    """Measure d-exposure (:func:`.d_exposure.d_exposure`) as a result: the highest class, or eq. 3's mean."""
    _check_name(name)
    per_class = _check_flag("per_class", per_class)
    template = DEFAULT_TEMPLATE if template is None else template
    words = _resolve_words(class_words, inserted, class_word_rule)
    m: DExposure = d_exposure(target, inserted, words, template=template)
    worst = m.worst
    evidence: dict[str, Any] = {"phrase": m.phrase_text, "inserted": dict(inserted)}
    if per_class:
        evidence["gate"] = (f"every class: the highest is {worst.entity_class} ({worst.word}) at {worst.value:.2f} "
                            f"bits; the paper's mean over classes (eq. 3) is {m.value:.2f} bits")
    else:
        evidence["gate"] = (f"the paper's mean over classes (eq. 3), {m.value:.2f} bits; the highest class is "
                            f"{worst.entity_class} at {worst.value:.2f} bits (per_class=True gates it)")
    for cls, per in m.per_class.items():
        evidence[f"class {cls}"] = _class_line(per)
    extra = {f"d_exposure_{cls}": per.value for cls, per in m.per_class.items()}
    extra["d_exposure_mean"] = m.value
    extra.update({f"ties_{cls}": float(per.ties) for cls, per in m.per_class.items()})
    label = ", ".join(f"{w} as {c}" for c, w in inserted.items()) if name is None else name
    value, chance, ceiling = ((worst.value, worst.chance, worst.ceiling) if per_class else (m.value, m.chance, m.ceiling))
    return LeakResult(
        attack="d-exposure", metric=CLASS_MAX_METRIC if per_class else MEAN_METRIC, value=value,
        threshold=threshold, direction="at_most", chance=chance, ceiling=ceiling, label=label, evidence=evidence,
        extra=extra, remedy=remedy_for("d-exposure", target), tolerance=tolerance, target=target_facts(target))


def measured_d_exposure(target: Any, inserted: Mapping[str, str], *, class_words: Mapping[str, Sequence[str]] | Any,
                        template: Sequence[str] | str | None, name: str | None, per_class: bool = True,
                        class_word_rule: str = "paper") -> LeakResult:
    """The measured result (``threshold=None``), from the result cache when possible."""
    _check_name(name)
    _check_flag("per_class", per_class)
    inputs = {"inserted": dict(inserted) if isinstance(inserted, Mapping) else inserted,
              "class_words": ({k: list(v) for k, v in class_words.items()} if isinstance(class_words, Mapping)
                              else class_words),
              "template": template, "name": name, "per_class": per_class, "class_word_rule": class_word_rule}
    return cached_results("d-exposure", [target], inputs,
                          lambda: [d_exposure_result(target, inserted, class_words=class_words, template=template,
                                                     threshold=None, name=name, per_class=per_class,
                                                     class_word_rule=class_word_rule)])[0]


def _per_epoch(target: Any, inserted: Mapping[str, str], epochs: tuple[int, ...], name: str | None,
               **options: Any) -> list[LeakResult]:
    """One measured result per epoch, labelled ``<label> @ epoch <e>`` with ``extra["epoch"]``."""
    out = []
    for epoch in epochs:
        at = _at_epoch(target, epoch)
        base = name if name is not None else ", ".join(f"{w} as {c}" for c, w in dict(inserted).items())
        r = measured_d_exposure(at, inserted, name=f"{base} @ epoch {epoch}", **options)
        out.append(dataclasses.replace(r, extra={**r.extra, "epoch": float(epoch)}))
    return out


@audited
def measure_d_exposure(target: Any, inserted: Mapping[str, str], *,
                       class_words: Mapping[str, Sequence[str]] | Any,
                       template: Sequence[str] | str | None = None, name: str | None = None,
                       per_class: bool = True, class_word_rule: str = "paper",
                       epochs: Sequence[int] | None = None) -> LeakResult | list[LeakResult]:
    """Measure the d-exposure of the ``inserted`` words without gating; the result is recorded.

    Same arguments as :func:`assert_d_exposure_below` without the limit and
    the tolerance. Returns the ``d-exposure`` :class:`LeakResult`
    (``threshold=None``) with the per-class figures and the mean in ``extra``;
    with ``epochs``, one such result per epoch, in order (Table 3's columns).
    """
    epochs = _check_epochs(epochs)
    options = dict(class_words=class_words, template=template, per_class=per_class, class_word_rule=class_word_rule)
    if epochs is None:
        return record(measured_d_exposure(target, inserted, name=name, **options))
    return [record(r) for r in _per_epoch(target, inserted, epochs, name, **options)]


@audited
def assert_d_exposure_below(target: Any, inserted: Mapping[str, str], max_bits: float, *,
                            class_words: Mapping[str, Sequence[str]] | Any,
                            template: Sequence[str] | str | None = None, name: str | None = None,
                            tolerance: float | None = None, per_class: bool = True,
                            class_word_rule: str = "paper",
                            epochs: Sequence[int] | None = None) -> LeakResult | list[LeakResult]:
    """Fail when the d-exposure (d-exposure-discriminative §3.1) exceeds ``max_bits``.

    ``target`` is a :class:`~pytest_privleak.protocols.TokenScorer` (for a CRF
    tagger, its marginals; a ``LogTokenScorer`` is read in log space);
    ``inserted`` maps each entity class to the ambiguous word inserted with
    that label (paper §4.1: ``{"ORG": "Williams", "PER": "Chelsea", "LOC":
    "Melbourne"}``); ``class_words`` gives each class's words ``W_i``, or is
    the training dataset to take them from by ``class_word_rule``
    (``"paper"``, the default: a one-word entity of the class and never of
    another; ``"exclusive"``: every occurrence a one-word entity of the
    class); ``template`` is the phrase with ``___`` for the word (default
    "There are many people who like ___").

    ``per_class=True`` (default) fails when any class's eq. 2 value exceeds
    the limit and names it; ``per_class=False`` gates the paper's mean (eq. 3).
    Both figures are in ``extra``. ``epochs``: gate the target at each of these
    epochs of its training (trained with ``checkpoints``); every epoch's result
    is recorded and the worst failing one is raised. ``name``: the result's
    label. ``tolerance``: bits the value may grow against a stored baseline
    before the baseline gate fails (default: the gate's own, 1 bit). NaN,
    infinite or misshapen probabilities raise (``NonFiniteError``, ``ValueError``).
    """
    __tracebackhide__ = True
    from ...assertions import check

    threshold = _check_bits(max_bits)
    tolerance = _check_tolerance(tolerance)
    epochs = _check_epochs(epochs)
    options = dict(class_words=class_words, template=template, per_class=per_class, class_word_rule=class_word_rule)
    if epochs is None:
        measured = measured_d_exposure(target, inserted, name=name, **options)
        return check(dataclasses.replace(measured, threshold=threshold, tolerance=tolerance))
    gated = [dataclasses.replace(r, threshold=threshold, tolerance=tolerance)
             for r in _per_epoch(target, inserted, epochs, name, **options)]
    failing = [r for r in gated if not r.passed]
    worst = max(failing, key=lambda r: r.value) if failing else None
    for r in gated:
        if r is not worst:   # failing epochs too: the report, a baseline and the figure over seeds need each epoch
            record(r)
    if worst is not None:
        others = [f"epoch {int(r.extra['epoch'])}: {r.value:.2f} bits" for r in failing if r is not worst]
        if others:
            worst = dataclasses.replace(worst, evidence={**worst.evidence, "also failing": "; ".join(others)})
        check(worst)   # raises
    return gated


def table3(rows: Mapping[int, Sequence[LeakResult]], classes: Sequence[str]) -> str:
    """The paper's Table 3 layout: one row per repetition count R, a column per class and epoch.

    ``rows`` maps R to the per-epoch results of :func:`measure_d_exposure`
    (``epochs=...``) for the target trained with the phrases repeated R times.
    """
    epochs = sorted({int(r.extra["epoch"]) for results in rows.values() for r in results if "epoch" in r.extra})
    head = "R".rjust(4) + "".join(f" | {c:^{8 * len(epochs) - 1}}" for c in classes)
    sub = " " * 4 + "".join(" | " + " ".join(f"{e:>7}" for e in epochs) for _ in classes)
    lines = [head, sub, "-" * len(sub)]
    for repeats, results in sorted(rows.items()):
        by_epoch = {int(r.extra.get("epoch", 0)): r for r in results}
        cells = []
        for c in classes:
            cells.append(" ".join(f"{by_epoch[e].extra[f'd_exposure_{c}']:7.2f}" if e in by_epoch else " " * 7
                                  for e in epochs))
        lines.append(f"{repeats:>4}" + "".join(f" | {cell}" for cell in cells))
    return "\n".join(lines)
