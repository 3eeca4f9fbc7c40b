"""Log-probabilities and cross-entropies that keep float64 precision where float32 rounds them to 0 (issue 33).

``logit(target) - logsumexp(logits)`` (what ``F.cross_entropy`` and
``log_softmax`` compute) loses everything once the target leads the other
classes by about 17 logits in float32 (37 in float64): the loss of every
confidently fitted record is then exactly 0, tied records cannot be ranked,
and a membership attack whose low-FPR threshold falls among them reads TPR 0.
With ``d_j = logit_j - logit(target)`` and ``s = max_(j != target) d_j``:

    log Pr(target) = -log(1 + exp(L)),   L = s + log(sum_(j != target) exp(d_j - s))

The sum holds the other classes only, each term at most 1 and the largest
exactly 1, so it neither cancels nor underflows in float32; ``L`` and the
softplus run in float64. A probability of ``1 - 1e-40`` reads ``-1e-40``, not
0 (down to ``exp(-745)``), at the memory of one float32 pass over the logits.
Differentiable.
"""
from __future__ import annotations

import torch

__all__ = ["log_prob_of", "cross_entropy64"]


def log_prob_of(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """``log softmax(logits)[..., target]`` in float64, to full precision near 0 (see the module docstring).

    ``logits [..., C]`` (any float dtype, read as float32), ``targets [...]`` class indices.
    """
    logits = logits.float()
    index = targets.long().unsqueeze(-1)
    d = (logits - logits.gather(-1, index)).scatter(-1, index, float("-inf"))   # the other classes only
    s = d.max(dim=-1).values
    s = torch.where(torch.isfinite(s), s, torch.zeros_like(s))   # one class (or all others -inf): the sum is 0
    rest = torch.exp(d - s.unsqueeze(-1)).sum(dim=-1)
    big = s.double() + torch.log(rest.double())                   # log sum_(j != target) exp(d_j)
    return -torch.logaddexp(torch.zeros_like(big), big)

def cross_entropy64(logits: torch.Tensor, labels: torch.Tensor, ignore_index: int | None = None) -> torch.Tensor:
    """Per-row cross-entropy ``-log softmax(logits)[label]`` in float64 (``reduction="none"``), exact near 0.

    For a team's own scorer: ``cross_entropy64(model(x), y)`` in place of
    ``F.cross_entropy(model(x), y, reduction="none")``, whose float32 (and even
    float64) result is exactly 0 for every confidently fitted record.
    ``logits [N, C]`` or ``[N, L, C]`` with ``labels [N]`` or ``[N, L]``;
    positions whose label is ``ignore_index`` get 0.
    """
    if ignore_index is None:
        return -log_prob_of(logits, labels)
    keep = labels != ignore_index
    loss = -log_prob_of(logits, torch.where(keep, labels, torch.zeros_like(labels)))
    return torch.where(keep, loss, torch.zeros_like(loss))
