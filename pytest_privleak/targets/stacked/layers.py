"""Embedding look-up, linear layers and the character CNN of k stacked models.

Every function takes stacked parameters (``[k, *shape]``, the names of the
per-model ``nn`` layer) and inputs with a leading model axis, and computes for
each model what its ``nn`` layer computes: ``embed`` is ``nn.Embedding``,
``linear`` is ``nn.Linear`` (a batched ``x W^T + b``), ``char_cnn`` is
:class:`~pytest_privleak.targets.char_cnn.CharCNN` (a same-length 1-D
convolution written as a batched product over the unfolded windows, then the
max over the word's non-padding positions).
"""
from __future__ import annotations

import torch

from ..vocab import PAD_ID


def embed(weight: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """``weight [k, V, d]``, ``ids [k, ...]`` -> ``[k, ..., d]``: row ``ids[j, ...]`` of model j's table."""
    k, rows, dim = weight.shape
    offsets = (torch.arange(k, device=ids.device) * rows).view(k, *([1] * (ids.dim() - 1)))
    return torch.nn.functional.embedding(ids + offsets, weight.reshape(k * rows, dim))


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """``x [k, ..., in]``, ``weight [k, out, in]``, ``bias [k, out]`` -> ``[k, ..., out]``."""
    k, inner = x.shape[0], x.shape[-1]
    flat = x.reshape(k, -1, inner)
    if bias is None:
        out = torch.bmm(flat, weight.transpose(1, 2))
    else:
        out = torch.baddbmm(bias.unsqueeze(1), flat, weight.transpose(1, 2))
    return out.view(*x.shape[:-1], weight.shape[1])


def char_cnn(params: dict[str, torch.Tensor], prefix: str, chars: torch.Tensor) -> torch.Tensor:
    """``chars [k, N, C]`` character ids (0 = padding) -> ``[k, N, filters]``, as ``CharCNN.forward``.

    ``prefix``: the per-model module's name (``"char_cnn."``), whose
    ``embedding.weight [k, n_chars, dim]``, ``conv.weight [k, filters, dim,
    kernel]`` and ``conv.bias [k, filters]`` are read.
    """
    weight = params[prefix + "conv.weight"]
    k, filters, dim, kernel = weight.shape
    n, width = chars.shape[1], chars.shape[2]
    x = embed(params[prefix + "embedding.weight"], chars)                    # [k, N, C, dim]
    pad = kernel // 2
    x = torch.nn.functional.pad(x, (0, 0, pad, pad))                          # [k, N, C + 2 pad, dim]
    windows = x.unfold(2, kernel, 1)                                          # [k, N, C, dim, kernel]
    flat = windows.reshape(k, n * width, dim * kernel)
    h = torch.baddbmm(params[prefix + "conv.bias"].unsqueeze(1), flat,
                      weight.reshape(k, filters, dim * kernel).transpose(1, 2)).view(k, n, width, filters)
    padding = (chars == PAD_ID).unsqueeze(-1)                                 # [k, N, C, 1]
    padding = padding & ~padding.all(dim=2, keepdim=True)                     # an all-padding word keeps its values
    return h.masked_fill(padding, float("-inf")).amax(dim=2)
