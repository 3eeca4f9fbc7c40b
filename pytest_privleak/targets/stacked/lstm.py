"""The recurrence of ``nn.LSTM`` (``batch_first``, optionally bidirectional, stacked layers) for k stacked models.

Each model's recurrence runs through torch's own fused LSTM kernel
(``torch.lstm``, what ``nn.LSTM`` calls), one call per model, layer and
direction, with the model's slice of the stacked weights; everything around
it (embeddings, dropout, heads, the CRF, the loss, the optimiser) runs once
for the whole stack. ``torch.func.vmap`` has no batching rule for that
kernel (torch 2.13: "Batching rule not implemented for aten::lstm.input"),
and the recurrence written as one batched matrix product per time step for
all models was slower on the CPU than k fused calls (measured with the
targets' shapes, k = 7, one thread, load about 12 on 2 cores: 690 against
409 ms per forward and backward for the joint model's two BiLSTM layers,
107 against 52 ms for the language model's LSTM, 111 against 69 ms for the
tagger's; ``bench/bench_seeds_cost.py`` times whole trainings).

Rows are padded at the end. The reverse direction reads each row reversed
within its own length (padding stays at the end), so neither direction
reads padding before a row's tokens: a model's outputs at a position depend
only on its own inputs, and padded positions' outputs are zero, as
``pad_packed_sequence`` gives them. Dropout between layers is the caller's
(each model's own masks), not the kernel's.
"""
from __future__ import annotations

from collections.abc import Callable

import torch


def reverse_index(lengths: torch.Tensor, width: int) -> torch.Tensor:
    """``[k, B, width]`` long: position ``t`` of each row reversed within its length (padding stays in place)."""
    t = torch.arange(width, device=lengths.device)
    n = lengths.unsqueeze(-1)
    return torch.where(t < n, n - 1 - t, t)


def _gather_time(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``x [k, B, L, d]`` with its time axis permuted per row by ``index [k, B, L]``."""
    return x.gather(2, index.unsqueeze(-1).expand_as(x))


def lstm(params: dict[str, torch.Tensor], prefix: str, x: torch.Tensor, mask: torch.Tensor, *, num_layers: int,
         bidirectional: bool, between_layers: Callable[[torch.Tensor], torch.Tensor] | None = None,
         reverse: torch.Tensor | None = None) -> torch.Tensor:
    """Outputs ``[k, B, L, H * directions]`` of ``nn.LSTM`` for inputs ``x [k, B, L, d]``, model by model.

    ``params``: stacked parameters named as ``nn.LSTM``'s under ``prefix``
    (``"lstm."``); ``mask [k, B, L]`` bool, each row a prefix of True;
    ``between_layers``: applied to each layer's output but the last (dropout);
    ``reverse``: :func:`reverse_index` of the rows (needed when bidirectional).
    """
    k = x.shape[0]
    keep = mask.unsqueeze(-1).to(x.dtype)
    for layer in range(num_layers):
        parts = []
        for suffix in [""] + (["_reverse"] if bidirectional else []):
            names = [f"{prefix}{kind}_l{layer}{suffix}" for kind in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
            weights = list(zip(*(params[name].unbind(0) for name in names)))        # per model: ih, hh, b_ih, b_hh
            seq = x if suffix == "" else _gather_time(x, reverse)
            zeros = x.new_zeros(1, x.shape[1], params[names[1]].shape[-1])
            out = torch.stack([torch.lstm(seq[j], (zeros, zeros), list(weights[j]), True, 1, 0.0, True, False, True)[0]
                               for j in range(k)])
            parts.append(out if suffix == "" else _gather_time(out, reverse))
        x = torch.cat(parts, dim=-1) * keep
        if between_layers is not None and layer < num_layers - 1:
            x = between_layers(x)
    return x
