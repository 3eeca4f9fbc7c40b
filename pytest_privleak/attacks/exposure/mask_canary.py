"""Exposure of a Mix And Match canary's secret token (mix-and-match-text-classifiers §4.3, §5.1.4; issue 9 item 4).

The secret is one token of a labelled sentence; its rank among the classifier's vocabulary
(the exhaustive search, or the Frankenstein generator's candidates pruned by the loss)
becomes an :class:`~.figure.Exposure`, so ``assert_exposure_below`` gates it like
any canary's.
"""
from __future__ import annotations

import math
from typing import Any

from ..mix_and_match.attack import ATTACK_NAMES, DEFAULT_BATCH, NO_GENERATOR, as_attack_model, mix_and_match
from ..mix_and_match.canaries import MaskCanary
from .figure import Exposure, chance_exposure

__all__ = ["EXPOSURE_METHODS", "mask_canary_exposure"]

#: ``compute_exposure``'s methods for a :class:`MaskCanary` and the attack each runs.
EXPOSURE_METHODS = {"auto": "auto", "exact": "exhaustive", "mix-and-match": "mix-and-match"}


def mask_canary_exposure(model: Any, canary: MaskCanary, *, method: str = "auto", budget: int,
                         candidates: int, batch_size: int = DEFAULT_BATCH) -> Any:
    """Exposure of a Mix And Match canary's secret token, as an :class:`.exposure_figure.Exposure` (module docstring).

    ``method``: ``"auto"`` (the exhaustive search when the filtered vocabulary
    has at most ``budget`` tokens, else Mix And Match), ``"exact"`` (the
    exhaustive search, §5.1.4) or ``"mix-and-match"`` (§4.3: the Frankenstein
    model's top ``candidates`` pruned by the classifier's loss).
    """
    if method not in EXPOSURE_METHODS:
        raise ValueError(f"method={method!r} does not apply to a Mix And Match canary; fix: one of "
                         f"{tuple(EXPOSURE_METHODS)} ('auto': the exhaustive search when the vocabulary fits "
                         "exact_budget, 'exact': exhaustive, 'mix-and-match': the paper's attack, pruning the "
                         "generator's top `references` candidates)")
    attack = EXPOSURE_METHODS[method]
    size = budget if attack == "auto" else candidates
    attack_model = as_attack_model(model)
    vocabulary = len(attack_model.candidate_words)
    if not attack_model.has_generator and (attack == "mix-and-match" or vocabulary > size):
        why = "method='mix-and-match'" if attack == "mix-and-match" else \
            f"method='auto' with the vocabulary ({vocabulary} whole-word candidates) over exact_budget={size}"
        raise ValueError(f"{why} needs Mix And Match's candidate generator, a masked LM (§4.3.1), but the model was "
                         "built without one (base_mlm=None); fix: mix_and_match_model(classifier, base_mlm, "
                         "tokenizer), or method='exact' (every candidate scored, needs only the classifier)")
    r = mix_and_match(attack_model, canary, method=attack, budget=size, batch_size=batch_size).rankings[0]
    found = "not among them" if math.isinf(r.rank) else f"rank {r.rank_range[1]} among them (ties against the secret)"
    evidence = {"rank": (f"{r.rank_range[1]} of {vocabulary} whole-word candidates (ties against the secret)"
                         if r.method == "exhaustive" else f"{r.scored} of {vocabulary} candidates pruned, {found}; "
                         "the exposure is an upper bound"),
                "attack": ATTACK_NAMES[r.method],
                "guesses": ", ".join(r.guesses)}
    extra = {"vocabulary": float(vocabulary), "scored": float(r.scored)}
    if r.candidates_needed is None:
        evidence["candidates Mix And Match needed"] = NO_GENERATOR
    else:
        extra.update(candidates_needed=float(r.candidates_needed), candidate_ratio=r.candidate_ratio)
    if not math.isinf(r.rank):
        extra["mid_rank"] = float(r.rank)
    rank = None if math.isinf(r.rank) else int(r.rank_range[1])
    return Exposure(r.exposure, r.method, rank, vocabulary, r.scored, math.log2(vocabulary),
                    chance_exposure(vocabulary), r.exposure_interval, r.secret_loss, None, extra=extra,
                    evidence=evidence)
