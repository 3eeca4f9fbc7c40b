"""The pretrained base as a free reference: membership of a fine-tuned language model in two forward passes.

After EZ-MIA (Ilić, Stanojević and Cvejoski 2026, "Powerful training-free
membership inference against autoregressive language models", arXiv
2601.12104, §3): a team that fine-tuned a public model always has the model
it started from, and that base is a reference trained without any of the
records, at no training cost. Their observation: fine-tuning shows most where
the fine-tuned model still predicts a piece wrong (its most likely next piece
is not the true one, an *error position*): on a member, fine-tuning has
still raised the true piece's probability there, relative to the base; on a
non-member the shifts go both ways. Their Error Zone score is the ratio of the
upward to the downward shifts over the error positions.

Per record, with ``d_t = log Pr_target(x_t | x_<t) - log Pr_base(x_t | x_<t)``
over the pieces ``t`` where the target's most likely piece is not ``x_t``:

    EZ = log(sum of the positive d_t) - log(sum of |negative d_t|)

(the log of the paper's ratio: it ranks the same, and ``+inf`` / ``-inf``
keep a record whose shifts all go one way at its end). Departures for the
short utterances of NLU data, where a fitted model often predicts every
piece: a record with fewer than two error positions (the paper scores such a
record 0) is scored over all its pieces, and records of equal EZ are ranked
by the whole sequence's shift ``sum_t d_t`` (the base-calibrated likelihood
ratio, as Mireshghallah et al. 2022 calibrate a fine-tuned model by its base),
the statistic being the dense rank of (EZ, shift). Higher = member.

The scorer offers the base through ``base_reference()`` (the causal-LM
adapter with ``base=``, the ``causal-lm`` target), and both the target and
the base ``token_predictions(utterances)``: per utterance the pieces'
log-probabilities and whether each is the model's most likely piece.

A classifier fine-tuned from a masked LM (the ``transformer-classifier``
target) has no next-piece predictions of its own; there the same statistic
compares masked-piece predictions (each piece masked in its own copy) of the
Frankenstein model (the fine-tuned encoder under the base's generation head,
mix-and-match §4.3.1) with the base masked LM's: our extension, not in the
paper, which studies autoregressive models only.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...finite import require_finite

#: fewer error positions than this: the record is scored over all its pieces (the paper: min 2 tokens)
MIN_ERROR_POSITIONS = 2


def base_of(scorer: Any) -> Any:
    """The scorer's pretrained base (``scorer.base_reference()``), or None when it names none."""
    method = getattr(scorer, "base_reference", None)
    if not callable(method):
        return None
    return method()


def _predictions(model: Any, items: Sequence[Any], what: str) -> list[tuple[np.ndarray, np.ndarray]]:
    method = getattr(model, "token_predictions", None)
    if not callable(method):
        raise TypeError(f"the base method needs per-piece predictions, and the {what} {type(model).__name__} has no "
                        "token_predictions(utterances); fix: use the causal-LM adapter "
                        "(pytest_privleak.adapters.from_transformers(model, tokenizer, base=base_model)) or the "
                        "causal-lm target")
    rows = list(method(items))
    if len(rows) != len(items):
        raise ValueError(f"{type(model).__name__}.token_predictions returned {len(rows)} rows for {len(items)} "
                         "utterances; fix: one (log-probabilities, hits) pair per utterance")
    out = []
    for i, (logp, hit) in enumerate(rows):
        logp = np.asarray(logp, dtype=np.float64).reshape(-1)
        hit = np.asarray(hit, dtype=bool).reshape(-1)
        require_finite(logp, what=f"the {what}'s piece log-probabilities of utterance {i}",
                       fix="check the model for NaN/inf weights or outputs")
        if logp.shape != hit.shape:
            raise ValueError(f"{type(model).__name__}.token_predictions: utterance {i} has {logp.size} "
                             f"log-probabilities and {hit.size} hits; fix: one of each per scored piece")
        out.append((logp, hit))
    return out


def error_zone(target_logp: np.ndarray, target_hit: np.ndarray, base_logp: np.ndarray) -> tuple[float, float]:
    """``(EZ, shift)`` of one record (see the module docstring): the error-zone log-ratio and the total shift."""
    d = np.asarray(target_logp, dtype=np.float64) - np.asarray(base_logp, dtype=np.float64)
    errors = ~np.asarray(target_hit, dtype=bool)
    zone = d[errors] if errors.sum() >= MIN_ERROR_POSITIONS else d
    up, down = float(zone[zone > 0].sum()), float(-zone[zone < 0].sum())
    with np.errstate(divide="ignore"):
        ez = float(np.log(up) - np.log(down)) if (up > 0 or down > 0) else 0.0
    return ez, float(d.sum())


def base_statistics(scorer: Any, base: Any, records: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
    """``(statistic, EZ)`` per record: the dense rank of (EZ, shift), higher = member, and the EZ shown."""
    target = _predictions(scorer, records, "target")
    reference = _predictions(base, records, "base")
    pairs = np.empty((len(records), 2), dtype=np.float64)
    for i, ((logp, hit), (base_logp, _)) in enumerate(zip(target, reference)):
        if base_logp.shape != logp.shape:
            raise ValueError(f"utterance {i}: the base scores {base_logp.size} pieces, the target {logp.size}; the "
                             "base must read the target's tokenizer; fix: pass the base with the fine-tuned "
                             "model's tokenizer (resized embeddings for added tokens)")
        pairs[i] = error_zone(logp, hit, base_logp)
    _, rank = np.unique(pairs, axis=0, return_inverse=True)        # rows sorted by EZ, then shift
    return rank.reshape(-1).astype(np.float64), pairs[:, 0]
