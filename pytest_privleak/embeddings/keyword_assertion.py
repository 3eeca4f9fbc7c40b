"""``measure_keyword_inference`` and ``assert_keyword_inference_at_most``: §VI keyword inference as a gate.

One :class:`LeakResult` per call: the attack's accuracy pooled over the
keywords' balanced test sets (the paper's average over keywords, weighted by
test-set size), its Clopper-Pearson interval and chance 0.5; each keyword's
accuracy and AUC are in ``extra`` and the evidence says which keywords were
read from which victim text.

Without ``victims``, the generated medical-style corpus stands in for the
paper's Medical data (split 10 : 1 into victims and shadow corpus, §VI-C),
and 2000 generated restaurant-style sentences for its Yelp-Food public corpus.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..results import LeakResult, record, audited
from .corpora import airline_corpus, medical_corpus, restaurant_corpus
from .defence_costs import cost_summary
from .describe import check_name, check_tolerance, encoder_facts, encoder_label
from .keywords import KeywordMeasurement, check_keywords, check_options, infer_keywords

ATTACK = "keyword-inference"
REMEDY = ("the embeddings tell which sensitive words the texts hold (privacy-risks-language-model-embeddings §VI): do "
          "not share raw embeddings of sensitive texts; remove or mask the sensitive words before encoding; or wrap the "
          "encoder in a defence of §VII (pytest_privleak.embeddings.defences: subspace_projection of these keywords, "
          "the paper's best trade-off (§VII: DANN at chance at beta=0.01 on most models, utility down ~15 points), "
          "privacy_preserving_mapping, laplace_noise, rounded) and re-run this assertion on the wrapped encoder; "
          "measure your encoder's cost with measure_utility(wrapped)")


def remedy() -> str:
    """The remedy with each defence's measured effect on white-box keyword inference and its utility cost."""
    return f"{REMEDY}. Defence costs {cost_summary('keyword')}"


STAND_INS = {"medical": medical_corpus, "airline": airline_corpus}
MODEL_NAMES = {"svm": "linear SVM (hinge loss in torch; no SVM library is a dependency)",
               "mlp": "MLP 80 sigmoid units", "dann": "DANN (25-unit domain-invariant E, gradient reversal)"}


def default_corpora(n_victims: int, seed: int, corpus: str = "medical") -> tuple[list[str], list[str], list[str]]:
    """Generated stand-ins: (victims, shadow, public) with victims : shadow = 10 : 1 (§VI-C).

    ``corpus``: ``"medical"`` (body-part keywords, MEDICAL_KEYWORDS) or
    ``"airline"`` (city keywords, AIRLINE_KEYWORDS), the paper's two cases.
    """
    if corpus not in STAND_INS:
        raise ValueError(f"corpus={corpus!r} is not a generated stand-in; fix: one of {sorted(STAND_INS)}")
    texts = STAND_INS[corpus](n_victims + max(1, n_victims // 10), np.random.default_rng([seed, 21])).texts
    public = restaurant_corpus(2000, np.random.default_rng([seed, 22])).texts
    return texts[:n_victims], texts[n_victims:], public


def _result(encoder: Any, m: KeywordMeasurement, threshold: float | None, name: str | None,
            tolerance: float | None) -> LeakResult:
    label = name if name is not None else encoder_label(encoder, f"{m.setting} {m.model}, {len(m.figures)} keywords")
    evidence = {"attack": f"{m.setting} keyword inference (§VI-B), {MODEL_NAMES[m.model]}, {m.n_train} training "
                          "samples per keyword",
                "per keyword": ", ".join(f"{f.keyword} {f.accuracy:.2f} (AUC {f.auc:.2f})" for f in m.figures),
                "recovered": "; ".join(f.recovered for f in sorted(m.figures, key=lambda f: -f.accuracy)[:3]),
                "test sets": f"balanced, {m.n} victim embeddings in all"}
    extra = {f"accuracy_{f.keyword}": f.accuracy for f in m.figures}
    extra["worst_keyword_accuracy"] = max(f.accuracy for f in m.figures)
    extra.update(successes=float(m.hits), trials=float(m.n))   # counts: pooled over seeds (Clopper-Pearson)
    # threshold-free companion of the argmax accuracy: how well the keyword score ranks the victims
    extra["mean_auc"] = float(np.mean([f.auc for f in m.figures]))
    if m.epoch_accuracies:
        # §VI-D reports the DANN's average and worst-case (best-epoch, picked with the labels) accuracy over its epochs
        extra["dann_epoch_mean_accuracy"] = float(np.mean(m.epoch_accuracies))
        extra["dann_epoch_best_accuracy"] = float(np.max(m.epoch_accuracies))
        evidence["over the epochs"] = (f"accuracy after each of {len(m.epoch_accuracies)} epochs: mean "
                                       f"{extra['dann_epoch_mean_accuracy']:.3f}, best "
                                       f"{extra['dann_epoch_best_accuracy']:.3f} (§VI-D's average and worst case); "
                                       "the figure is the final model's")
    return LeakResult(attack=ATTACK, metric=f"accuracy_{m.setting}", value=m.accuracy, threshold=threshold,
                      direction="at_most", interval=m.interval, confidence=m.confidence, chance=0.5, ceiling=1.0,
                      label=label, evidence=evidence, extra=extra, remedy=remedy(), tolerance=tolerance,
                      target=encoder_facts(encoder))


def _run(encoder: Any, keywords: Any, victims: Sequence[str] | None, shadow: Sequence[str] | None,
         public: Sequence[str] | None, setting: str, model: str, epochs: int | None, n_victims: int, seed: int,
         confidence: float) -> KeywordMeasurement:
    keywords = check_keywords(keywords)
    if victims is None:
        victims, default_shadow, default_public = default_corpora(n_victims, seed)
        shadow = default_shadow if shadow is None else shadow
        public = default_public if public is None else public
    return infer_keywords(encoder, keywords, victims=victims, shadow=shadow, public=public, setting=setting,
                          model=model, epochs=epochs, seed=seed, confidence=confidence)


def measured_keyword_inference(encoder: Any, keywords: Any, *, victims: Sequence[str] | None,
                               shadow: Sequence[str] | None, public: Sequence[str] | None, setting: str, model: str,
                               epochs: int | None, n_victims: int, seed: int, confidence: float,
                               name: str | None) -> LeakResult:
    """The measured result (``threshold=None``): from the result cache when ``encoder`` has a content hash and
    the same call ran before (:mod:`pytest_privleak.cache.results`), else computed."""
    from ..cache.results import cached_results

    inputs = {"keywords": keywords, "victims": victims, "shadow": shadow, "public": public, "setting": setting,
              "model": model, "epochs": epochs, "n_victims": n_victims, "seed": seed, "confidence": confidence,
              "name": name}

    def compute() -> list[LeakResult]:
        m = _run(encoder, keywords, victims, shadow, public, setting, model, epochs, n_victims, seed, confidence)
        return [_result(encoder, m, None, name, None)]

    return cached_results(ATTACK, [encoder], inputs, compute)[0]


@audited
def measure_keyword_inference(encoder: Any, keywords: Any, *, victims: Sequence[str] | None = None,
                              shadow: Sequence[str] | None = None, public: Sequence[str] | None = None,
                              setting: str = "white-box", model: str = "auto", epochs: int | None = None,
                              n_victims: int = 1000, seed: int = 0, confidence: float = 0.95,
                              name: str | None = None) -> LeakResult:
    """Measure the §VI attack's accuracy (pooled over ``keywords``) without gating; the result is recorded."""
    __tracebackhide__ = True   # a usage error shows at the caller's line
    check_name(name)
    check_keywords(keywords)
    check_options(setting, model, epochs)
    return record(measured_keyword_inference(encoder, keywords, victims=victims, shadow=shadow, public=public,
                                             setting=setting, model=model, epochs=epochs, n_victims=n_victims,
                                             seed=seed, confidence=confidence, name=name))


@audited
def assert_keyword_inference_at_most(encoder: Any, keywords: Any, max_accuracy: float, *,
                                     victims: Sequence[str] | None = None, shadow: Sequence[str] | None = None,
                                     public: Sequence[str] | None = None, setting: str = "white-box",
                                     model: str = "auto", epochs: int | None = None, n_victims: int = 1000,
                                     seed: int = 0, confidence: float = 0.95, name: str | None = None,
                                     tolerance: float | None = None) -> LeakResult:
    """Fail when the §VI attack tells which victims' texts hold ``keywords`` with accuracy above ``max_accuracy``.

    Chance is 0.5 (balanced test sets). ``setting="white-box"`` (default, the
    stronger attack of §VI-D: a shadow corpus from the victims' distribution;
    SVM under 10^3 samples, MLP above) or ``"black-box"`` (DANN on a public
    corpus); ``model`` names one attack model instead of the default. Without
    ``victims`` the generated medical-style stand-in corpus is used.
    """
    __tracebackhide__ = True
    from ..assertions import check

    if isinstance(max_accuracy, bool) or not isinstance(max_accuracy, (int, float)) or not 0.5 <= max_accuracy <= 1:
        raise ValueError(f"max_accuracy must be an accuracy in [0.5, 1] (chance on the balanced test sets is 0.5), "
                         f"got {max_accuracy!r}; fix: e.g. max_accuracy=0.6")
    check_name(name)
    tolerance = check_tolerance(tolerance)
    check_keywords(keywords)                   # before any work, at the caller's line
    check_options(setting, model, epochs)
    measured = measured_keyword_inference(encoder, keywords, victims=victims, shadow=shadow, public=public,
                                          setting=setting, model=model, epochs=epochs, n_victims=n_victims,
                                          seed=seed, confidence=confidence, name=name)
    return check(dataclasses.replace(measured, threshold=float(max_accuracy), tolerance=tolerance))
