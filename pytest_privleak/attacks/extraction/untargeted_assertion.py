"""``measure_untargeted_extraction`` / ``assert_untargeted_extraction_at_most`` (Carlini et al. 2021 §5-§6).

The figure is the number of distinct training spans (``min_tokens`` words or
more, verbatim) among the top-ranked samples of the model (:mod:`.untargeted_extraction`);
the rate of top-ranked samples that emit one comes with its Clopper-Pearson
interval.  The chance figure is what the same procedure (ranked by zlib) finds
in the samples of the reference model, a model that never saw the records,
when one is given.  A pass is inconclusive, not a pass, where most top-ranked samples are
too short to show a span, or where most training records are shorter than ``min_record_tokens``
words (such a record holds no window and is too short to be found whole, so a model reciting it
would show nothing; :mod:`.untargeted_extraction` says why short records are found whole).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any

from ...cache.results import cached_results
from ...results import LeakResult, record, target_facts, audited
from ...stats import clopper_pearson
from .assertion import _check_confidence, _check_name
from ..inconclusive import check_allow_inconclusive, check_covered
from .untargeted import (DEFAULT_MAX_TOKENS, DEFAULT_MIN_RECORD_TOKENS, DEFAULT_MIN_TOKENS,
                                    DEFAULT_SAMPLES, DEFAULT_TOP, DEFAULT_TOP_K, UntargetedExtraction,
                                    untargeted_extraction)

REMEDY = ("the model emits its training records verbatim when sampled: de-duplicate the training data "
          "(repeated records are memorised first), scrub personal data before training, train fewer epochs with "
          "early stopping, or train with differential privacy (DP-SGD)")


def _whole(min_tokens: int, min_record_tokens: int) -> str:
    """``4-7 words``: the lengths of the records found whole (none when ``min_record_tokens == min_tokens``)."""
    low, high = min_record_tokens, min_tokens - 1
    return f"{low}-{high} words" if low < high else f"{low} words" if low == high else ""


def _records_line(m: UntargetedExtraction, min_tokens: int, min_record_tokens: int) -> str:
    windowed = m.records - m.records_whole - m.records_unfindable
    whole = _whole(min_tokens, min_record_tokens)
    return (f"{m.records} training record(s): {windowed} of >= {min_tokens} words found by their {min_tokens}-word "
            f"windows, " + (f"{m.records_whole} of {whole} found whole, " if whole else "none found whole, ")
            + f"{m.records_unfindable} shorter than {min_record_tokens} words that cannot be found")


def _result(model: Any, m: UntargetedExtraction, chance: float | None, *, min_tokens: int, confidence: float,
            name: str | None, samples: int, min_record_tokens: int) -> LeakResult:
    top = len(m.ranked)
    low, high = clopper_pearson(m.emitting, top, confidence)
    evidence: dict[str, Any] = {
        "metric": m.metric, "why": m.why,
        "procedure": f"{samples} samples drawn, the {top} ranked most suspicious by {m.metric} checked for "
                     f"verbatim spans of >= {min_tokens} words of the training records"
                     + (f", and for whole records of {_whole(min_tokens, min_record_tokens)}"
                        if _whole(min_tokens, min_record_tokens) else ""),
        "records": _records_line(m, min_tokens, min_record_tokens),
        "emitting": f"{m.emitting} of {top} top-ranked samples emit a training span "
                    f"(rate {m.emitting / top:.3f}, {confidence:.0%} CI {low:.3f} .. {high:.3f})",
        "long_enough": f"{m.long_enough} of {top} top-ranked samples have >= {m.reach} words (the fewest in which "
                       "a findable record can be emitted)"}
    for i, span in enumerate(m.spans[:5]):
        evidence[f"span {i + 1}"] = " ".join(span)
    if chance is None:
        evidence["chance"] = "no reference model given: pass reference= to measure what a model that never saw " \
                             "the records emits by the same procedure"
    return LeakResult(attack="untargeted_extraction", metric="training_spans", value=float(len(m.spans)),
                      threshold=None, direction="at_most", interval=None, confidence=confidence, chance=chance,
                      label=name if name is not None else f"{m.metric}, top {top} of {samples}, >= {min_tokens} words",
                      evidence=evidence, remedy=REMEDY,
                      target={**target_facts(model), "ranking": m.metric, "top": top, "long_enough": m.long_enough,
                              "reach": m.reach, "records": m.records, "records_unfindable": m.records_unfindable},
                      extra={"emitting_rate": m.emitting / top, "rate_low": low, "rate_high": high})


def _measured(model, training_data, *, reference, reference_tokenizer, name, confidence, **options) -> LeakResult:
    """The measured result: from the result cache when every model has a content hash and the call ran before."""
    _check_name(name)
    confidence = _check_confidence(confidence)

    def compute() -> list[LeakResult]:
        m = untargeted_extraction(model, training_data, reference=reference,
                                  reference_tokenizer=reference_tokenizer, **options)
        chance = None
        if reference is not None:   # the same procedure on a model that never saw the records
            ref_options = {k: v for k, v in options.items() if k != "tokenizer"}
            ref_options["metric"] = "zlib" if m.metric == "reference" else m.metric
            chance = float(len(untargeted_extraction(reference, training_data, tokenizer=reference_tokenizer,
                                                     **ref_options).spans))
        return [_result(model, m, chance, min_tokens=options["min_tokens"], confidence=confidence, name=name,
                        samples=options["samples"], min_record_tokens=options["min_record_tokens"])]

    models = [m for m in (model, options.get("tokenizer"), reference, reference_tokenizer) if m is not None]
    inputs = {"training_data": training_data, "name": name, "confidence": confidence,
              **{k: v for k, v in options.items() if k != "tokenizer"}}
    return cached_results("untargeted_extraction", models, inputs, compute)[0]


@audited
def measure_untargeted_extraction(model: Any, training_data: Any, *, tokenizer: Any = None, reference: Any = None,
                                  reference_tokenizer: Any = None, metric: str = "auto",
                                  samples: int = DEFAULT_SAMPLES, top: int = DEFAULT_TOP,
                                  top_k: int | None = DEFAULT_TOP_K, top_p: float | None = None,
                                  max_tokens: int = DEFAULT_MAX_TOKENS, min_tokens: int = DEFAULT_MIN_TOKENS,
                                  min_record_tokens: int = DEFAULT_MIN_RECORD_TOKENS, seed: int = 0,
                                  confidence: float = 0.95, name: str | None = None) -> LeakResult:
    """Measure how many distinct training spans ``model`` emits among its top-ranked samples; recorded.

    Same arguments as :func:`assert_untargeted_extraction_at_most` without the limit.
    """
    result = _measured(model, training_data, reference=reference, reference_tokenizer=reference_tokenizer,
                          name=name, confidence=confidence, tokenizer=tokenizer, metric=metric, samples=samples,
                          top=top, top_k=top_k, top_p=top_p, max_tokens=max_tokens, min_tokens=min_tokens,
                          min_record_tokens=min_record_tokens, seed=seed)
    return record(result)


@audited
def assert_untargeted_extraction_at_most(model: Any, training_data: Any, max_spans: int, *, tokenizer: Any = None,
                                         reference: Any = None, reference_tokenizer: Any = None,
                                         metric: str = "auto", samples: int = DEFAULT_SAMPLES,
                                         top: int = DEFAULT_TOP, top_k: int | None = DEFAULT_TOP_K,
                                         top_p: float | None = None, max_tokens: int = DEFAULT_MAX_TOKENS,
                                         min_tokens: int = DEFAULT_MIN_TOKENS,
                                         min_record_tokens: int = DEFAULT_MIN_RECORD_TOKENS, seed: int = 0,
                                         confidence: float = 0.95, name: str | None = None,
                                         tolerance: float | None = None,
                                         allow_inconclusive: bool = False) -> LeakResult:
    """Fail when ``model``'s top-ranked samples emit more than ``max_spans`` distinct training spans.

    Carlini et al. 2021 §5-§6: ``samples`` texts sampled with top-k ``top_k`` (40) from the
    beginning-of-sequence token, at most ``max_tokens`` tokens each, ranked by ``metric``
    (``"auto"``: ``"reference"`` when ``reference=`` is given, else ``"zlib"``; or
    ``"perplexity"``), the ``top`` first checked against ``training_data`` (an NLUDataset's train split,
    utterances or strings: the records whose emission is a leak) for verbatim spans of at least
    ``min_tokens`` words, and for whole records of ``min_record_tokens`` (4) to ``min_tokens - 1`` words
    (NLU records are mostly shorter than 8 words; see :mod:`.untargeted_extraction`).
    ``model``/``reference``: the ``lstm-lm`` or ``causal-lm`` target, or a transformers causal LM
    with ``tokenizer=`` / ``reference_tokenizer=``. The chance figure is the
    spans the reference model's own samples emit (ranked by zlib: a ratio to itself is 1). A pass is
    inconclusive (``InconclusiveAuditError``) unless ``allow_inconclusive=True`` where fewer than half of the
    top-ranked samples are long enough to emit a findable record, or where more than half of the records are
    shorter than ``min_record_tokens`` words (they cannot be found). Returns the recorded result.
    """
    __tracebackhide__ = True
    if isinstance(max_spans, bool) or not isinstance(max_spans, int) or max_spans < 0:
        raise ValueError(f"max_spans must be an integer >= 0 (distinct training spans emitted), got {max_spans!r}; "
                         "fix: e.g. max_spans=0")
    if tolerance is not None and (isinstance(tolerance, bool) or not isinstance(tolerance, (int, float))
                                  or not 0 <= tolerance < math.inf):
        raise ValueError(f"tolerance must be a number >= 0 or None, got {tolerance!r}; fix: e.g. tolerance=1")
    allow = check_allow_inconclusive(allow_inconclusive)
    result = _measured(model, training_data, reference=reference, reference_tokenizer=reference_tokenizer,
                          name=name, confidence=confidence, tokenizer=tokenizer, metric=metric, samples=samples,
                          top=top, top_k=top_k, top_p=top_p, max_tokens=max_tokens, min_tokens=min_tokens,
                          min_record_tokens=min_record_tokens, seed=seed)
    top_n, long_enough, reach = result.target["top"], result.target["long_enough"], result.target["reach"]
    n_records, unfindable = result.target["records"], result.target["records_unfindable"]
    short_samples, short_records = 2 * long_enough < top_n, 2 * unfindable > n_records
    covered = "; ".join(
        ([f"only {long_enough} of the {top_n} top-ranked samples have >= {reach} words, so most could not show a "
          "training span"] if short_samples else [])
        + ([f"{unfindable} of the {n_records} training records are shorter than min_record_tokens="
            f"{min_record_tokens} words, so a model reciting them would show nothing"] if short_records else []))
    rest = " and ".join(([f"raise max_tokens (now {max_tokens}) or lower min_tokens (now {min_tokens})"]
                         if short_samples else [])
                        + ([f"lower min_record_tokens (now {min_record_tokens}) if records that short are specific "
                            "to your data"] if short_records else []))
    complete = not (short_samples or short_records)
    return check_covered(dataclasses.replace(result, threshold=float(max_spans), tolerance=tolerance),
                         complete=complete, covered=covered, rest=rest, allow_inconclusive=allow)
