"""The membership statistics of each method (higher = member), and how ``method="auto"`` chooses.

- ``loss``: ``-loss`` (Yeom et al. 2018);
- ``reference``: ``-(loss - reference loss)`` with one reference model
  (difficulty calibration, Watson et al. 2022);
- ``lira``: :mod:`.lira` on the logit-scaled confidence (or the
  loss), online when the references were trained on the candidates;
- ``rmia``: :mod:`.rmia` against the population records;
- ``zlib`` and ``min-k``: :mod:`.reference_free`, for a lone
  language model that no reference can be trained for;
- ``base``: :mod:`.base_reference`, a fine-tuned language model against
  the pretrained base it started from (after EZ-MIA), no training at all.

``auto`` is the strongest attack on the model at hand (issue 33): every method
the inputs allow runs on the same scores (:func:`auto_methods`: with reference
models loss, LiRA and RMIA; with one reference the loss and its calibration;
for a language model also zlib and Min-K%), and the figure is the highest, its
interval at a Bonferroni share of the confidence (:func:`~.attack.measure_methods`).
Without references that is the loss attack, whose weakness at low FPR
(Carlini et al. 2022 §III) the reason says. Shi et al. 2024 find Min-K% above
the loss for pretraining-data detection on large LMs, but on the built-in LSTM
LM fine-tuned to its members (``bench/bench_membership.py``, 300 members, 1000
non-members) the loss finds 99.7 % of the members at 1 % FPR, zlib 79.3 % and
Min-K% 60.0 %: the contest keeps whichever is strongest on the model at hand.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...finite import require_finite
from .figures import auc_from_statistics, auc_interval
from .base_reference import base_of, base_statistics
from .lira import lira_offline, lira_online, logit_confidence
from .records import as_utterances, training_form
from .reference_free import (DEFAULT_MIN_K_FRACTION, has_token_log_probs, min_k_statistic, texts_of,
                             token_log_probs, zlib_statistic)
from .references import ReferenceSet, TargetRecipe, check_time_budget_s, train_references
from .rmia import DEFAULT_GAMMA, DEFAULT_OFFLINE_A, log_ratio, rmia_scores, tune_offline_a

METHODS = ("auto", "loss", "reference", "lira", "rmia", "zlib", "min-k", "base")


class DistributionShiftWarning(UserWarning):
    """Members and non-members look drawn from different distributions: part of the figure may be that shift."""


class CoarseScoresWarning(UserWarning):
    """Many records got exactly the same score (e.g. a float32 loss of 0): the attack cannot rank them."""


#: a score shared by more than this share of the records (and by at least 3) is named in a CoarseScoresWarning
#: (a bag-of-words model gives the same loss to reordered utterances: a few such ties are no alarm)
COARSE_SHARE = 0.02


def coarse_scores(values: np.ndarray, what: str) -> str | None:
    """A warning text when one value (most often an exact 0) is shared by more than :data:`COARSE_SHARE` of
    ``values``: tied scores hide the records' order, and a tie at a fixed FPR's threshold makes that FPR
    unmeasurable (:func:`~.figures.tpr_at_fpr`)."""
    if values.size < 2:
        return None
    distinct, counts = np.unique(values, return_counts=True)
    top = int(np.argmax(counts))
    count = int(counts[top])
    if count < 3 or count <= COARSE_SHARE * values.size:
        return None
    value = float(distinct[top])
    zeros = int(np.sum(values == 0.0))
    head = (f"{zeros} of {values.size} scores ({zeros / values.size:.1%}) are exactly 0" if zeros == count else
            f"{count} of {values.size} scores ({count / values.size:.1%}) are exactly {value:.17g}")
    return (f"{what}: {head}, so the attack cannot rank those records, and a fixed FPR whose threshold falls among "
            "them is not measurable; fix: score with pytest_privleak.adapters.cross_entropy64(logits, labels) (or "
            "log_prob_of for a language model's pieces), exact in float64: F.cross_entropy rounds a loss to 0 once "
            "the true class leads by about 17 logits in float32, 37 in float64")


@dataclass(frozen=True)
class Statistics:
    """Per-candidate statistics of one method and why it ran."""

    method: str
    why: str
    members: np.ndarray
    non_members: np.ndarray
    member_losses: np.ndarray
    non_member_losses: np.ndarray
    detail: dict[str, str] = field(default_factory=dict)
    shift: str | None = None
    shown: np.ndarray | None = None      # per-candidate score to show (RMIA: its Pr_z fraction), else the statistic
    shown_name: str = "statistic"


def score_records(scorer: Any, items: Sequence[Any], what: str) -> np.ndarray:
    """``scorer.score(items)`` as float64 ``[N]``; refuses complex, text and non-finite scores by name."""
    if not hasattr(scorer, "score"):
        raise TypeError(f"{what} scorer {type(scorer).__name__} is not a SequenceScorer; give it score(utterances) -> "
                        "array (lower = more likely), e.g. "
                        "pytest_privleak.adapters.from_transformers(model, tokenizer)")
    raw = np.asarray(scorer.score(items))
    if raw.dtype.kind not in "biuf":
        raise TypeError(f"the {what} scorer {type(scorer).__name__}.score returned {raw.dtype} values "
                        f"(e.g. {raw.reshape(-1)[:1].tolist()!r}); fix: score() must return real numbers, one loss "
                        "per utterance (lower = more likely)")
    values = raw.astype(np.float64).reshape(-1)
    if values.size != len(items):
        raise ValueError(f"the {what} scorer returned {values.size} scores for {len(items)} utterances; fix: "
                         "score() must return one score per utterance")
    require_finite(values, what=f"the {what} model's losses ({type(scorer).__name__}.score)",
                   fix="check the model for NaN/inf weights or outputs (a diverged training run) and retrain it")
    return values


class ScoreBook:
    """Each model's scores of each record list, computed once: ``auto`` runs several methods on the same scores."""

    def __init__(self) -> None:
        self._scores: dict[tuple[int, tuple], np.ndarray] = {}
        self._models: list[Any] = []          # kept alive, so that their ids stay theirs

    def score(self, scorer: Any, items: Sequence[Any], what: str) -> np.ndarray:
        key = (id(scorer), tuple(items))
        if key not in self._scores:
            self._scores[key] = score_records(scorer, items, what)
            self._models.append(scorer)
        return self._scores[key]


def _check_same_architecture(scorer: Any, models: Sequence[Any], argument: str) -> None:
    for j, model in enumerate(models):
        if type(model) is not type(scorer):
            raise TypeError(f"{argument}: reference {j + 1} is a {type(model).__name__}, the target a "
                            f"{type(scorer).__name__}; LiRA and RMIA compare the target with models of its own "
                            "architecture and training; fix: train the references with the target's recipe "
                            "(TargetRecipe) or pass models of the target's class")


def _shift_check(member_out: np.ndarray, non_member_out: np.ndarray, confidence: float) -> str | None:
    """A note when models never trained on either set already tell members from non-members (distribution shift)."""
    (low, high), _ = auc_interval(-member_out, -non_member_out, confidence)
    if low <= 0.5 <= high:
        return None
    auc = auc_from_statistics(-member_out, -non_member_out)
    return (f"non-members look drawn from another distribution than members: models never trained on either set "
            f"separate them with AUC {auc:.3f} (CI {low:.3f} .. {high:.3f}, chance 0.5); part of the figure may be "
            "that shift, not membership; fix: draw non-members from the same source as the training data (a random "
            "held-out split)")


def check_budget_applies(references: Any, time_budget_s: Any) -> float | None:
    """``time_budget_s`` checked; refused unless there are references to train (a :class:`TargetRecipe`)."""
    budget = check_time_budget_s(time_budget_s)
    if budget is not None and not isinstance(references, TargetRecipe):
        given = "no references" if references is None else f"references={type(references).__name__}"
        raise ValueError(f"time_budget_s={time_budget_s!r} budgets the training of reference models, but with "
                         f"{given} nothing is trained; fix: pass references=TargetRecipe(...) (how the target was "
                         "trained) to train up to k references within the budget, or drop time_budget_s")
    return budget


def resolve_references(references: Any, recipe_k: int, online: bool, seed: int, members: list, non_members: list,
                       population: Sequence[Any] | None, time_budget_s: float | None = None) -> ReferenceSet | None:
    """A :class:`ReferenceSet` from ``references`` (a set, or a :class:`TargetRecipe` to train ``recipe_k`` with,
    fewer when ``time_budget_s`` runs out: see :func:`~.membership_references.train_references`)."""
    check_budget_applies(references, time_budget_s)
    if references is None or isinstance(references, ReferenceSet):
        return references
    if isinstance(references, TargetRecipe):
        if population is None:
            taken = {training_form(u) for u in members + non_members}
            population = [u for u in references.dataset.valid if u not in taken]
            if not population:
                raise ValueError("references=TargetRecipe(...) needs population records (neither members nor "
                                 "non-members) to train the references on and to compare with; the recipe's dataset "
                                 "has no valid split to take them from; fix: pass population=[...] (hundreds of "
                                 "held-out records)")
        population = as_utterances("population", population)
        return train_references(references, members + non_members, population, k=recipe_k, online=online, seed=seed,
                                time_budget_s=time_budget_s)
    raise TypeError(f"references must be None, a ReferenceSet (from train_references) or a TargetRecipe (how the "
                    f"target was trained), got {type(references).__name__}")


def _offline_a(references: ReferenceSet, offline_a: float | str, ref_z: np.ndarray,
               population: list) -> tuple[float | None, str]:
    """RMIA's offline ``a`` and how it was chosen (None online)."""
    if references.online:
        return None, ""
    if offline_a != "auto":
        if isinstance(offline_a, bool) or not isinstance(offline_a, (int, float)) or not 0 <= offline_a <= 1:
            raise ValueError(f"offline_a must be 'auto' or a number in [0, 1], got {offline_a!r}")
        return float(offline_a), "given"
    if references.k < 2:
        return DEFAULT_OFFLINE_A, "default: one reference leaves nothing to tune it on"
    return tune_offline_a(ref_z, references.trained_on(population)), "tuned on the references, Zarifzadeh et al. §3"


def auto_methods(scorer: Any, reference: Any, references: ReferenceSet | None) -> tuple[tuple[str, ...], str]:
    """The methods ``auto`` runs on the model at hand, and why.

    Once reference models exist, every method that reads them costs only
    scoring, so ``auto`` runs them all and the figure is the strongest
    (:func:`~.attack.measure_methods`): neither LiRA nor RMIA wins everywhere
    (issue 33: RMIA wins on the joint BiLSTM-CRF, LiRA on a bag-of-words
    classifier); the reference-free statistics join for a language model
    (one with ``token_log_probs``).
    """
    free = ("zlib", "min-k") if has_token_log_probs(scorer) else ()
    if callable(getattr(scorer, "base_reference", None)) and base_of(scorer) is not None:
        free = (*free, "base")
    if references is not None:
        return ("loss", "lira", "rmia", *free), (f"auto: {references.k} reference model(s), so every method that "
                                                  "reads them runs (each costs only scoring)")
    if reference is not None:
        return ("loss", "reference", *free), "auto: one reference model, so the loss and the calibrated loss run"
    if free:
        what = "the pretrained base as a free reference" if "base" in free else "the reference-free statistics"
        return ("loss", *free), ("auto: no reference models (pass references=TargetRecipe(...) for LiRA and RMIA), "
                                 f"so {what} of a language model run beside the loss")
    return ("loss",), ("auto: no reference models (pass references=TargetRecipe(...) for LiRA and RMIA), so the "
                       "loss attack, which Carlini et al. 2022 find near chance at low FPR: a pass here is weak "
                       "evidence")


def statistics(method: str, scorer: Any, members: list, non_members: list, *, reference: Any = None,
               references: ReferenceSet | None = None, gamma: float = DEFAULT_GAMMA,
               offline_a: float | str = "auto", variance: str = "auto", lira_statistic: str = "logit",
               confidence: float = 0.95, why: str = "", book: ScoreBook | None = None) -> Statistics:
    """The statistics of ``method`` (a named method; ``auto`` is resolved by :func:`auto_methods`)."""
    if method not in METHODS or method == "auto":
        raise ValueError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    if lira_statistic not in ("logit", "loss"):
        raise ValueError(f"lira_statistic must be 'logit' (Carlini et al.'s logit-scaled confidence) or 'loss', "
                         f"got {lira_statistic!r}")
    book = book or ScoreBook()
    why = why or f"method={method!r} was asked for"
    if method == "reference" and reference is None:
        raise ValueError("method='reference' needs reference= (a model trained like the target without the members)")
    if method in ("lira", "rmia") and references is None:
        raise ValueError(f"method={method!r} needs references= (a TargetRecipe saying how the target was trained, "
                         "or a ReferenceSet from train_references)")
    if references is not None:
        _check_same_architecture(scorer, references.models, "references")
    if reference is not None:
        _check_same_architecture(scorer, [reference], "reference")
    loss_m = book.score(scorer, members, "target")
    loss_n = book.score(scorer, non_members, "target")
    detail: dict[str, str] = {}
    shift = None
    if method == "loss":
        return Statistics(method, why, -loss_m, -loss_n, loss_m, loss_n)
    if method == "zlib":
        return Statistics(method, why, zlib_statistic(loss_m, texts_of(members)),
                          zlib_statistic(loss_n, texts_of(non_members)), loss_m, loss_n,
                          {"zlib": "log-perplexity / zlib bits of the text (Carlini et al. 2021 §5.1)"})
    if method == "min-k":
        tokens_m = token_log_probs(scorer, members, "target")
        tokens_n = token_log_probs(scorer, non_members, "target")
        detail["Min-K% Prob"] = (f"mean log-probability of the {DEFAULT_MIN_K_FRACTION:.0%} least likely tokens "
                                 "(Shi et al. 2024 §3)")
        return Statistics(method, why, min_k_statistic(tokens_m), min_k_statistic(tokens_n), loss_m, loss_n, detail)
    if method == "base":
        base = base_of(scorer)
        if base is None:
            raise ValueError(f"method='base' needs the pretrained model the target was fine-tuned from, and "
                             f"{type(scorer).__name__} names none; fix: from_transformers(model, tokenizer, "
                             "base=base_model), or the causal-lm target (its base is known)")
        stat, ez = base_statistics(scorer, base, members + non_members)
        n_m = len(members)
        detail["base reference"] = ("the pretrained base, no reference trained; error-zone log-ratio of the "
                                    "fine-tuning's probability shifts where the target predicts wrong (after "
                                    "EZ-MIA, arXiv 2601.12104 §3), ties by the whole shift")
        return Statistics(method, why, stat[:n_m], stat[n_m:], loss_m, loss_n, detail, None, ez,
                          "error-zone log-ratio")
    if method == "reference":
        ref_m = book.score(reference, members, "reference")
        ref_n = book.score(reference, non_members, "reference")
        return Statistics(method, why, ref_m - loss_m, ref_n - loss_n, loss_m, loss_n,
                          shift=_shift_check(ref_m, ref_n, confidence))
    candidates = members + non_members
    n_m = len(members)
    ref_c = np.stack([book.score(r, candidates, f"reference {j + 1}") for j, r in enumerate(references.models)])
    trained = references.trained_on(candidates)
    out_mean = np.where(~trained, ref_c, 0).sum(0) / np.maximum((~trained).sum(0), 1)
    has_out = (~trained).any(0)
    if has_out[:n_m].sum() >= 2 and has_out[n_m:].sum() >= 2:
        shift = _shift_check(out_mean[:n_m][has_out[:n_m]], out_mean[n_m:][has_out[n_m:]], confidence)
    target_c = np.concatenate([loss_m, loss_n])
    setting = "online" if references.online else "offline"
    if references.note:
        detail["references"] = references.note
    if method == "lira":
        if lira_statistic == "logit" and why.startswith("auto") and min(target_c.min(), ref_c.min()) < 0:
            lira_statistic = "loss"      # auto: scores that are no negative log-probability keep LiRA on -loss
            detail["LiRA statistic"] = ("-loss: the scores go below 0, so they are no negative log-probability "
                                        "to logit-scale (Carlini et al. §IV-B)")
        phi = logit_confidence if lira_statistic == "logit" else (lambda losses: -np.asarray(losses))
        target_stat, ref_stat = phi(target_c), phi(ref_c)
        if references.online:
            stat = lira_online(target_stat, ref_stat, trained, variance)
        else:
            stat = lira_offline(target_stat, ref_stat, variance)
        detail["LiRA"] = (f"{setting}, {references.k} reference(s), statistic "
                          f"{'logit-scaled confidence' if lira_statistic == 'logit' else '-loss'}, variance {variance}")
        return Statistics(method, why, stat[:n_m], stat[n_m:], loss_m, loss_n, detail, shift)
    population = list(references.population)
    ref_z = np.stack([book.score(r, population, f"reference {j + 1}") for j, r in enumerate(references.models)])
    a, how = _offline_a(references, offline_a, ref_z, population)
    ratio_c = log_ratio(target_c, ref_c, a)
    ratio_z = log_ratio(book.score(scorer, population, "target"), ref_z, a)
    scores = rmia_scores(ratio_c, ratio_z, gamma)
    ranking = scores.ranking()
    detail["RMIA"] = (f"{setting}, {references.k} reference(s), gamma {gamma:g}"
                      + (f", offline a {a:g} ({how})" if a is not None else "")
                      + f", {scores.n_population} population records z; ranked by Pr_z[LR >= gamma], ties by the ratio")
    return Statistics(method, why, ranking[:n_m], ranking[n_m:], loss_m, loss_n, detail, shift, scores.score,
                      f"RMIA score Pr_z[LR >= {gamma:g}]")
