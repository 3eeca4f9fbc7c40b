"""Per-sample gradients of a linear-chain CRF (pytorch-crf) for DP-SGD, which Opacus does not provide.

Opacus computes per-sample gradients layer by layer from the layer's inputs
("activations") and the gradient of the loss with respect to its output
("backprops"). It ships grad samplers for linear, embedding, normalisation and
its own recurrent layers; its generic fallback (``torch.func``) reads only the
first input of a layer, and a CRF's log-likelihood needs three (emissions,
tags, mask), so the CRF's transition parameters would get no correct
per-sample gradient.

:func:`crf_grad_sample` computes them exactly: it re-evaluates the CRF
log-likelihood with one copy of the transition parameters per sentence (the
forward algorithm, Lafferty et al. 2001), so one backward pass gives each
sentence's gradient (gold-path counts minus expected counts), scaled by that
sentence's backprop. Requires the CRF to be called as
``crf(emissions, tags, mask)`` with tensors only, returning one log-likelihood
per sentence: keyword arguments never reach a forward hook.
"""
from __future__ import annotations

import torch


def crf_log_likelihood(emissions: torch.Tensor, tags: torch.Tensor, mask: torch.Tensor, start: torch.Tensor,
                       end: torch.Tensor, transitions: torch.Tensor) -> torch.Tensor:
    """Log-likelihood ``[B]`` of ``tags [B, L]`` under a CRF with per-sentence parameters.

    ``emissions [B, L, T]``, ``mask [B, L]`` (bool, first column on), ``start``
    and ``end`` ``[B, T]``, ``transitions [B, T, T]`` (from, to). Batched over
    sentences; the loop runs over positions only.
    """
    batch, length, _ = emissions.shape
    rows = torch.arange(batch, device=emissions.device)
    mask = mask.bool()
    score = start[rows, tags[:, 0]] + emissions[rows, 0, tags[:, 0]]
    alpha = start + emissions[:, 0]
    for i in range(1, length):
        on = mask[:, i]
        step = transitions[rows, tags[:, i - 1], tags[:, i]] + emissions[rows, i, tags[:, i]]
        score = score + step * on
        following = torch.logsumexp(alpha.unsqueeze(2) + transitions + emissions[:, i].unsqueeze(1), dim=1)
        alpha = torch.where(on.unsqueeze(1), following, alpha)
    last = tags[rows, mask.long().sum(1) - 1]
    score = score + end[rows, last]
    return score - torch.logsumexp(alpha + end, dim=1)


def crf_grad_sample(layer, activations, backprops: torch.Tensor) -> dict:
    """Opacus grad sampler for a pytorch-crf ``CRF`` called as ``crf(emissions, tags, mask)`` -> ``[B]``.

    ``backprops [B]`` is d(loss)/d(log-likelihood of sentence b) (already
    scaled by Opacus for a mean loss); returns ``{parameter: [B, *shape]}``.
    """
    if len(activations) != 3:
        raise TypeError(f"a CRF under DP-SGD must be called as crf(emissions, tags, mask) with tensors only "
                        f"(got {len(activations)} positional inputs): keyword arguments never reach the hook "
                        "that records a layer's inputs, so the per-sample gradient cannot be computed; fix: "
                        "call it positionally, returning one log-likelihood per sentence")
    emissions, tags, mask = activations
    if not layer.batch_first:
        emissions, tags, mask = emissions.transpose(0, 1), tags.transpose(0, 1), mask.transpose(0, 1)
    if backprops.dim() != 1:
        raise ValueError(f"the CRF's output must be one log-likelihood per sentence ([B]), got backprops of shape "
                         f"{list(backprops.shape)}; fix: reduction='none'")
    batch = emissions.shape[0]
    params = (layer.start_transitions, layer.end_transitions, layer.transitions)
    copies = [p.detach().unsqueeze(0).expand(batch, *p.shape).clone().requires_grad_(True) for p in params]
    with torch.enable_grad():
        ll = crf_log_likelihood(emissions.detach().to(copies[0].dtype), tags, mask, *copies)
        grads = torch.autograd.grad((ll * backprops.to(ll.dtype)).sum(), copies)
    return {p: g for p, g in zip(params, grads) if p.requires_grad}
