"""Reference-free membership statistics for a lone language model (higher = member).

When no training function is known, no reference model can be trained; two
published statistics still beat the raw loss on language models:

- ``zlib`` (Carlini et al. 2021, "Extracting training data from large
  language models", §5.1 "Comparing to zlib compression"): the model's
  log-perplexity divided by the text's zlib entropy (bits of its compressed
  UTF-8 bytes). Text that is cheap for the model but not for zlib (not merely
  repetitive or templated) is what a model memorised. Statistic:
  ``-(log-perplexity / zlib bits)``.
- ``min-k`` (Shi et al. 2024, "Detecting pretraining data from large language
  models", ICLR, §3 "Min-K% Prob"): the mean log-probability of the ``k %``
  least likely tokens of the text; a seen text has few very unlikely tokens.
  The paper's default, and ours, is ``k = 20 %``.

Both run by name (``method="zlib"`` / ``"min-k"``), not by default: on the
built-in LSTM LM the plain loss finds more members (see
:mod:`.membership_methods`). ``min-k`` needs per-token log-probabilities: a scorer offers them as
``token_log_probs(utterances) -> list of 1-D arrays`` (natural log, one entry
per scored token). The transformers causal-LM adapter and the built-in LSTM LM
do; any scorer with that method works.
"""
from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...finite import require_finite

#: Shi et al. 2024 §3/§5: k = 20 % of the tokens, the setting of their main results.
DEFAULT_MIN_K_FRACTION = 0.2


def zlib_bits(texts: Sequence[str]) -> np.ndarray:
    """The zlib entropy of each text: ``8 * len(zlib.compress(text))`` bits (level 9), float64 ``[N]``."""
    return np.array([8.0 * len(zlib.compress(t.encode("utf-8"), 9)) for t in texts], dtype=np.float64)


def zlib_statistic(log_perplexities: np.ndarray, texts: Sequence[str]) -> np.ndarray:
    """``-(log-perplexity / zlib bits)`` per text (Carlini et al. 2021 §5.1); higher = more likely a member."""
    losses = np.asarray(log_perplexities, dtype=np.float64)
    if losses.shape != (len(texts),):
        raise ValueError(f"zlib statistic: {losses.size} log-perplexities for {len(texts)} texts; give one per text")
    return -(losses / zlib_bits(texts))


def check_fraction(fraction: Any) -> float:
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0.0 < fraction <= 1.0:
        raise ValueError(f"min_k_fraction must lie in (0, 1] (Shi et al.'s default is {DEFAULT_MIN_K_FRACTION}, "
                         f"the 20 % least likely tokens), got {fraction!r}")
    return float(fraction)


def min_k_statistic(token_log_probs: Sequence[np.ndarray], fraction: float = DEFAULT_MIN_K_FRACTION) -> np.ndarray:
    """Mean of the ``ceil(fraction * n)`` lowest token log-probabilities of each text (Shi et al. 2024 §3)."""
    fraction = check_fraction(fraction)
    out = np.empty(len(token_log_probs), dtype=np.float64)
    for i, values in enumerate(token_log_probs):
        row = np.asarray(values, dtype=np.float64).reshape(-1)
        if row.size == 0:
            raise ValueError(f"min-k: text {i} has no scored token; fix: drop empty records")
        count = max(1, math.ceil(fraction * row.size))
        out[i] = np.partition(row, count - 1)[:count].mean()
    return out


def has_token_log_probs(scorer: Any) -> bool:
    return callable(getattr(scorer, "token_log_probs", None))


def token_log_probs(scorer: Any, items: Sequence[Any], what: str) -> list[np.ndarray]:
    """``scorer.token_log_probs(items)`` checked: one finite, non-positive 1-D array per item."""
    if not has_token_log_probs(scorer):
        raise TypeError(f"method='min-k' needs per-token log-probabilities, and the {what} scorer "
                        f"{type(scorer).__name__} has no token_log_probs(utterances) method; fix: use a language "
                        "model adapter (pytest_privleak.adapters.from_transformers on a causal LM) or the built-in "
                        "lstm-lm target, or method='zlib' / 'loss'")
    rows = list(scorer.token_log_probs(items))
    if len(rows) != len(items):
        raise ValueError(f"{type(scorer).__name__}.token_log_probs returned {len(rows)} rows for {len(items)} "
                         "utterances; fix: return one array of token log-probabilities per utterance")
    checked = []
    for i, row in enumerate(rows):
        values = np.asarray(row, dtype=np.float64).reshape(-1)
        require_finite(values, what=f"the {what} model's token log-probabilities of utterance {i}",
                       fix="check the model for NaN/inf weights or outputs and retrain it")
        if (values > 1e-9).any():
            raise ValueError(f"{type(scorer).__name__}.token_log_probs returned a positive log-probability "
                             f"({values.max():.4g}) for utterance {i}; fix: return log Pr(token), which is <= 0")
        checked.append(values)
    return checked


def texts_of(items: Sequence[Any]) -> list[str]:
    """The text each record reads as (an Utterance's tokens joined by spaces)."""
    return [" ".join(u.tokens) for u in items]
