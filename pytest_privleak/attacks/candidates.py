"""Enumerate and score candidate secrets of a canary (canary-extraction-nlu §3.1, §4.3).

A candidate's score is the model's training loss on the whole canary, known
prefix + candidate secret, with the canary's known intent and tags (the loss
``L(f(E(x_c)), y_c)`` of eq. 3 evaluated at one-hot inputs). Lower means the
model finds the candidate more likely. The exhaustive extraction attack and the
exposure metric share this scoring.

Secrets are given as indices into the pattern's reduced vocabulary V0
(``pattern.vocabulary``), one row per candidate.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from ..protocols import OutOfVocabularyError  # noqa: F401  (re-exported: raised by the scorers here)

if TYPE_CHECKING:  # pragma: no cover
    from ..canaries import Canary, CanaryPattern
    from ..protocols import SoftInputModel

#: Largest space the exhaustive attack enumerates unless told otherwise (12^4 colours fit, 10^6 pins do not).
DEFAULT_BUDGET = 100_000


def pattern_of(canary_or_pattern: "Canary | CanaryPattern") -> "CanaryPattern":
    """The :class:`CanaryPattern` of a canary, or the pattern itself."""
    from ..canaries import Canary, CanaryPattern

    if isinstance(canary_or_pattern, Canary):
        return canary_or_pattern.pattern
    if isinstance(canary_or_pattern, CanaryPattern):
        return canary_or_pattern
    raise TypeError(f"expected a Canary or CanaryPattern, got {type(canary_or_pattern).__name__}; "
                    "fix: build one with pytest_privleak.canaries.canary(...)")


def vocabulary_rows(model: "SoftInputModel", tokens: Sequence[str], *, role: str) -> torch.Tensor:
    """Row index in ``model.vocabulary`` of each token; :class:`OutOfVocabularyError` names every missing one.

    ``role`` says which tokens these are (e.g. "prefix of canary pattern 'pin'").
    """
    index = _vocabulary_index(model)
    missing = [t for t in dict.fromkeys(tokens) if t not in index]
    if missing:
        raise OutOfVocabularyError(missing_tokens_message(missing, role, len(index)))
    return torch.tensor([index[t] for t in tokens], dtype=torch.long)


def missing_tokens_message(missing: Sequence[str], role: str, vocabulary_size: int) -> str:
    """Why an attack cannot feed ``missing`` tokens, and the fixes that work (injecting the canary is not one).

    A vocabulary built from the training corpus alone lacks the V0 tokens the
    corpus never holds (a pin's '0' in ATIS), even when the canary itself was
    injected: the canary holds only its own secret's tokens.
    """
    listed = ", ".join(repr(t) for t in missing)
    return (f"{len(missing)} token(s) of the {role} are not in the target's vocabulary ({vocabulary_size} tokens): "
            f"{listed}. The attack feeds the embedding row of every prefix token and of every candidate secret "
            "token, so the target's vocabulary must hold them all; injecting the canary is not enough (it holds "
            "only its own secret's tokens, and a vocabulary built from the corpus lacks the others). Fix: train "
            f"the target with these tokens in its vocabulary (train_target(..., extra_tokens=[{listed}]); the "
            "built-in targets add the reduced vocabularies of the canaries injected with inject_canaries), or, "
            "for your own model, add them to the model's vocabulary and embedding matrix")


def _vocabulary_index(model: Any) -> dict[str, int]:
    vocabulary = getattr(model, "vocabulary", None)
    if vocabulary is None:
        raise TypeError(f"{type(model).__name__} has no 'vocabulary'; it does not implement the SoftInputModel "
                        "protocol (pytest_privleak.protocols.SoftInputModel)")
    return {token: i for i, token in enumerate(vocabulary)}


def enumerate_space(vocab_size: int, n: int, *, budget: int | None = DEFAULT_BUDGET) -> torch.Tensor:
    """All ``vocab_size**n`` secrets as a ``[vocab_size**n, n]`` LongTensor, lexicographic order.

    Row ``k`` is the base-``vocab_size`` digits of ``k``, first position most
    significant. Raises ``ValueError`` when the space exceeds ``budget``.
    """
    if vocab_size < 1 or n < 1:
        raise ValueError(f"vocab_size and n must be >= 1, got vocab_size={vocab_size}, n={n}")
    size = vocab_size ** n
    if budget is not None and size > budget:
        raise ValueError(f"the secret space has {vocab_size}^{n} = {size} candidates, over the budget of "
                         f"{budget}; fix: raise budget= or use the gradient attack (method='gradient')")
    return space_digits(torch.arange(size, dtype=torch.long), vocab_size, n)


def space_digits(numbers: Any, vocab_size: int, n: int) -> torch.Tensor:
    """Secrets ``[B, n]`` (V0 indices) numbered ``numbers`` in :func:`enumerate_space` order.

    Row ``k`` is the base-``vocab_size`` digits of ``numbers[k]``, most significant
    first (the inverse of :func:`secret_index`). Sampling needs a few thousand rows
    of spaces far too large to list, so this never materialises the whole space.
    """
    numbers = torch.as_tensor(numbers, dtype=torch.long)
    powers = vocab_size ** torch.arange(n - 1, -1, -1, dtype=torch.long)
    return (numbers.unsqueeze(1) // powers) % vocab_size


def canary_rows(model: "SoftInputModel", canary_or_pattern: "Canary | CanaryPattern") -> tuple[torch.Tensor, torch.Tensor]:
    """(prefix rows ``[m]``, V0 rows ``[|V0|]``) of a pattern in the model's embedding matrix."""
    pattern = pattern_of(canary_or_pattern)
    label = " ".join(pattern.prefix + ("k",) * pattern.length)
    rows = vocabulary_rows(model, pattern.prefix + pattern.vocabulary,
                           role=f"prefix and reduced vocabulary V0 of canary pattern {pattern.name!r} ({label!r})")
    return rows[:len(pattern.prefix)], rows[len(pattern.prefix):]


def discrete_loss(model: "SoftInputModel", weights: torch.Tensor, prefix_rows: torch.Tensor, v0_rows: torch.Tensor,
                  secrets: torch.Tensor, intents: Sequence[str], tags: Sequence[Sequence[str]],
                  batch_size: int = 1024, *, label: str | None = None) -> torch.Tensor:
    """Loss ``[K]`` of one-hot canaries: row ``k`` is ``prefix_rows[k]`` then ``v0_rows[secrets[k]]``.

    ``prefix_rows`` is ``[m]`` (shared) or ``[K, m]``; ``intents``/``tags`` have
    one entry (shared) or ``K``. Batched, no gradients; result on the CPU.
    ``label``: what the scoring is of; a scoring longer than a few seconds then
    shows secrets scored of the space (:class:`~pytest_privleak.progress.work.Work`).
    """
    from ..progress.work import Work

    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    device = weights.device
    secrets = secrets.to(device)
    count = secrets.shape[0]
    prefix_rows = prefix_rows.to(device)
    if prefix_rows.dim() == 1:
        prefix_rows = prefix_rows.unsqueeze(0).expand(count, -1)
    word_rows = torch.cat([prefix_rows, v0_rows.to(device)[secrets]], dim=1)
    out = []
    with torch.no_grad(), Work(label or "scoring", count, unit="secret", phase="scored") as work:
        for start in range(0, count, batch_size):
            stop = min(start + batch_size, count)
            rows_intents = list(intents) * (stop - start) if len(intents) == 1 else list(intents[start:stop])
            rows_tags = list(tags) * (stop - start) if len(tags) == 1 else list(tags[start:stop])
            loss = model.loss_from_embeddings(weights[word_rows[start:stop]], rows_intents, rows_tags)
            out.append(loss_rows(loss, stop - start).detach().float().cpu())
            work.advance(stop - start)
    return torch.cat(out) if out else torch.zeros(0)


def loss_rows(loss: Any, rows: int) -> torch.Tensor:
    """``loss`` as returned by ``loss_from_embeddings``, checked to be one float per input row (the protocol)."""
    if not isinstance(loss, torch.Tensor) or not loss.is_floating_point() or tuple(loss.shape) != (rows,):
        shape = tuple(loss.shape) if isinstance(loss, torch.Tensor) else type(loss).__name__
        raise TypeError(f"loss_from_embeddings returned {shape} for {rows} input rows; the SoftInputModel protocol "
                        f"needs a float tensor of shape ({rows},), one summed loss per row (no mean over the "
                        "batch); fix: return the per-row loss (e.g. reduction='none', then sum over tokens)")
    return loss


def most_probable_secrets(log_probs: torch.Tensor, count: int) -> torch.Tensor:
    """The ``count`` secrets of highest joint probability under independent per-position distributions.

    ``log_probs`` is ``[B, n, V]`` (log-probabilities of each V0 token at each
    unknown position); returns ``[B, min(count, V^n), n]`` V0 indices, most
    probable first. Exact k-best of a sum: a secret among the ``count`` best of
    positions ``0..j`` has its first ``j`` tokens among the ``count`` best of
    positions ``0..j-1`` (else ``count`` better secrets share its last token), so
    keeping ``count`` partial secrets per position loses none of them.
    """
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise ValueError(f"count must be an integer >= 1, got {count!r}")
    batch, n, vocab = log_probs.shape
    scores = log_probs[:, 0, :]                                        # [B, c]
    secrets = torch.arange(vocab, device=log_probs.device).expand(batch, vocab).unsqueeze(-1)
    scores, order = scores.topk(min(count, vocab), dim=1)
    secrets = secrets.gather(1, order.unsqueeze(-1))
    for j in range(1, n):
        joint = (scores.unsqueeze(-1) + log_probs[:, j, :].unsqueeze(1)).reshape(batch, -1)   # [B, c * V]
        scores, order = joint.topk(min(count, joint.shape[1]), dim=1)
        parent, token = order // vocab, order % vocab
        secrets = torch.cat([secrets.gather(1, parent.unsqueeze(-1).expand(-1, -1, j)), token.unsqueeze(-1)], dim=2)
    return secrets


def score_candidates(model: "SoftInputModel", canary_or_pattern: "Canary | CanaryPattern", secrets: torch.Tensor,
                     batch_size: int = 1024) -> torch.Tensor:
    """Model loss ``[K]`` of each candidate canary (lower = more likely), canary-extraction-nlu eq. 3 at one-hot inputs.

    ``secrets`` is a ``[K, n]`` LongTensor of indices into the pattern's V0;
    embeddings are rows ``W[ids]`` of ``model.input_embeddings()``. Float32 on the CPU.
    """
    pattern = pattern_of(canary_or_pattern)
    secrets = torch.as_tensor(secrets, dtype=torch.long)
    if secrets.dim() != 2 or secrets.shape[1] != pattern.length:
        raise ValueError(f"secrets must be a [K, {pattern.length}] tensor of V0 indices for pattern "
                         f"{pattern.name!r}, got shape {tuple(secrets.shape)}")
    if secrets.numel() and (int(secrets.min()) < 0 or int(secrets.max()) >= len(pattern.vocabulary)):
        raise ValueError(f"secrets hold indices outside V0 (0..{len(pattern.vocabulary) - 1}) of pattern {pattern.name!r}")
    prefix, v0 = canary_rows(model, pattern)
    weights = model.input_embeddings().detach()
    return discrete_loss(model, weights, prefix, v0, secrets, [pattern.intent], [pattern.tags], batch_size)


#: How :func:`rank_of` counts an alternative scoring exactly as well as the candidate.
TIES = ("against", "favour")


def rank_of(score: Any, others: Any, *, ties: str) -> int:
    """1-based rank of a candidate scoring ``score`` among the ``others`` (lower score = more likely).

    ``ties="against"``: ``1 + #{others <= score}``, the rank of the Secret Sharer's
    exposure (d-exposure-discriminative §2, eq. 1): a model scoring everything
    alike ranks the candidate last, so shows no exposure. ``ties="favour"``:
    ``1 + #{others < score}``. ``others`` is a tensor or array of any shape, not
    holding the candidate itself. Non-finite scores raise ``ValueError``.
    """
    if ties not in TIES:
        raise ValueError(f"ties={ties!r} is not one of {TIES}")
    score = float(score)
    others = torch.as_tensor(others).detach().to("cpu", torch.float64).reshape(-1)
    if not math.isfinite(score) or not bool(torch.isfinite(others).all()):
        raise ValueError("ranking needs finite scores; the scorer returned NaN or inf, check the model")
    beaten_or_tied = others <= score if ties == "against" else others < score
    return 1 + int(beaten_or_tied.sum())


def secret_index(secret_indices: Sequence[int], vocab_size: int) -> int:
    """Row of a secret in :func:`enumerate_space` order."""
    k = 0
    for digit in secret_indices:
        k = k * vocab_size + int(digit)
    return k
