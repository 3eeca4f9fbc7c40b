"""The log-likelihood of pytorch-crf's linear-chain CRF for k stacked models, with batched matrix products.

Per model, what ``torchcrf.CRF(emissions, tags, mask, reduction="none")``
returns: the score of the gold path (start + emissions + transitions + end,
padded steps adding nothing) minus the log partition function ``log Z`` of
the forward algorithm.

pytorch-crf can be fed the k models folded into its batch axis (rows
``[k B]``, a transition matrix per row: its ``_compute_normalizer`` broadcasts
take a ``[k B, T, T]`` matrix as they take a shared one; measured equal to
the per-model CRF), but its forward step is ``logsumexp`` over a ``[B, T, T]``
sum, about eight elementwise passes over ``T^2`` values per sentence and step.
With the 60 tags of the generated corpus that was most of a training step
and grows with k, so the step is written here as a matrix product in the
same log space (Rabiner 1989's scaled forward algorithm, with logs):
``alpha'_j = m + c + log sum_i exp(alpha_i - m) exp(A_ij - c) + e_j``,
``m = max_i alpha_i``, ``c = max_ij A_ij``, one ``[k, B, T] x [k, T, T]``
product per step. A transition ``c - 87`` nats below the best one (float32's
``exp`` underflow) counts as impossible, as its ``e^-87`` share of ``Z`` does
not register in float32 either; the sum is kept above float32's smallest
normal so that such a step stays finite.
"""
from __future__ import annotations

import torch


def log_likelihood(params: dict[str, torch.Tensor], prefix: str, emissions: torch.Tensor, tags: torch.Tensor,
                   mask: torch.Tensor) -> torch.Tensor:
    """``[k, B]`` log-likelihoods ``log p(tags | emissions)``, as ``CRF(..., reduction="none")`` per model.

    ``emissions [k, B, L, T]``, ``tags``/``mask [k, B, L]`` (batch first, each
    mask row a prefix of True); ``params`` holds ``start_transitions [k, T]``,
    ``end_transitions [k, T]`` and ``transitions [k, T, T]`` (from, to) under ``prefix``.
    """
    start = params[prefix + "start_transitions"]
    end = params[prefix + "end_transitions"]
    trans = params[prefix + "transitions"]
    return gold_score(emissions, tags, mask, start, end, trans) - log_partition(emissions, mask, start, end, trans)


def gold_score(emissions: torch.Tensor, tags: torch.Tensor, mask: torch.Tensor, start: torch.Tensor,
               end: torch.Tensor, trans: torch.Tensor) -> torch.Tensor:
    """``[k, B]`` score of the tag path ``tags``: ``CRF._compute_score`` with a model axis."""
    k, batch, width, n_tags = emissions.shape
    weight = mask.to(emissions.dtype)
    emitted = emissions.gather(3, tags.unsqueeze(-1)).squeeze(-1) * weight                   # [k, B, L]
    pairs = (tags[:, :, :-1] * n_tags + tags[:, :, 1:]).flatten(1)                           # [k, B (L - 1)]
    moved = trans.flatten(1).gather(1, pairs).view(k, batch, width - 1) * weight[:, :, 1:]   # [k, B, L - 1]
    last = tags.gather(2, (mask.long().sum(dim=2, keepdim=True) - 1)).squeeze(-1)            # [k, B]
    emitted, moved = emitted.unbind(2), moved.unbind(2)   # unbind: one backward for all steps
    score = start.gather(1, tags[:, :, 0]) + emitted[0]
    for i in range(1, width):
        score = score + moved[i - 1] + emitted[i]
    return score + end.gather(1, last)


def log_partition(emissions: torch.Tensor, mask: torch.Tensor, start: torch.Tensor, end: torch.Tensor,
                  trans: torch.Tensor) -> torch.Tensor:
    """``[k, B]`` log partition function by the forward algorithm, one batched matrix product per step."""
    width = emissions.shape[2]
    top = trans.flatten(1).amax(dim=1).view(-1, 1, 1)                                        # c: [k, 1, 1]
    scaled = torch.exp(trans - top)                                                          # [k, T, T]
    tiny = torch.finfo(emissions.dtype).tiny
    steps, valid = emissions.unbind(2), mask.unsqueeze(-1).unbind(2)   # unbind: one backward for all steps
    alpha = start.unsqueeze(1) + steps[0]                                                    # [k, B, T]
    for i in range(1, width):
        peak = alpha.amax(dim=2, keepdim=True)
        summed = torch.bmm(torch.exp(alpha - peak), scaled).clamp_min(tiny)
        alpha = torch.where(valid[i], torch.log(summed) + (peak + top) + steps[i], alpha)
    final = alpha + end.unsqueeze(1)
    return torch.logsumexp(final, dim=2)
