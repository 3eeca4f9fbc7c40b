"""The recurrence of ``nn.LSTM`` (``batch_first``, optionally bidirectional, stacked layers) for k models at once.

Per layer and direction, as ``nn.LSTM`` (gates in the order i, f, g, o):
``gates = x W_ih^T + b_ih + h W_hh^T + b_hh``, ``c = sigmoid(f) c + sigmoid(i)
tanh(g)``, ``h = sigmoid(o) tanh(c)``. The input projection of all time steps
is one batched product; the time loop then runs one batched product per step
for every model and both directions together (the reverse direction reads each
row reversed within its own length, so padding stays at the end). Rows are
padded at the end and every model's outputs at a position depend only on its
inputs up to there (forward) or from there to its end (reverse); padded
positions' outputs are zero, as ``pad_packed_sequence`` gives them.

``sigmoid`` is computed as ``0.5 tanh(x / 2) + 0.5`` (one ``tanh`` over all four gates): torch's vectorised and
scalar sigmoid kernels round differently, and which one an element meets
depends on where it sits in the tensor, so a model's weights would depend on
how many models are stacked with it; ``tanh`` gives the same bits either way.
"""
from __future__ import annotations

from collections.abc import Callable

import torch


def _gate_constants(hidden: int, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``[4H]`` vectors so that ``tanh(gates * scale) * half + shift`` is sigmoid on the i, f, o blocks and
    tanh on the g block: 0.5 / 0.5 / 0.5 for a sigmoid block, 1 / 1 / 0 for the tanh block."""
    def blocks(a: float, b: float) -> torch.Tensor:
        return torch.tensor([a] * (2 * hidden) + [b] * hidden + [a] * hidden, dtype=like.dtype, device=like.device)

    return blocks(0.5, 1.0), blocks(0.5, 1.0), blocks(0.5, 0.0)


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
    """Outputs ``[k, B, L, H * directions]`` of ``nn.LSTM`` for inputs ``x [k, B, L, d]``.

    ``params``: stacked parameters named as ``nn.LSTM``'s under ``prefix``
    (``"lstm."``); ``mask [k, B, L]`` bool, each row a prefix of True;
    ``between_layers``: applied to each layer's output but the last (dropout);
    ``reverse``: :func:`reverse_index` of the rows (needed when bidirectional).
    """
    k, batch, width = x.shape[:3]
    directions = 2 if bidirectional else 1
    keep = mask.unsqueeze(-1).to(x.dtype)
    for layer in range(num_layers):
        names = [f"l{layer}"] + ([f"l{layer}_reverse"] if bidirectional else [])
        w_ih = torch.stack([params[f"{prefix}weight_ih_{n}"] for n in names], 1).flatten(0, 1)   # [k D, 4H, d]
        w_hh = torch.stack([params[f"{prefix}weight_hh_{n}"] for n in names], 1).flatten(0, 1)   # [k D, 4H, H]
        bias = torch.stack([params[f"{prefix}bias_ih_{n}"] + params[f"{prefix}bias_hh_{n}"] for n in names],
                           1).flatten(0, 1)                                                    # [k D, 4H]
        inputs = [x] + ([_gather_time(x, reverse)] if bidirectional else [])
        seq = torch.stack(inputs, 1).flatten(0, 1)                                              # [k D, B, L, d]
        hidden = w_hh.shape[2]
        proj = torch.baddbmm(bias.unsqueeze(1), seq.reshape(k * directions, batch * width, seq.shape[-1]),
                             w_ih.transpose(1, 2)).view(k * directions, batch, width, 4 * hidden)
        w_hh_t = w_hh.transpose(1, 2)
        scale, half, shift = _gate_constants(hidden, x)
        h = x.new_zeros(k * directions, batch, hidden)
        c = x.new_zeros(k * directions, batch, hidden)
        outputs = []
        for step in proj.unbind(2):                       # unbind: one backward for all steps, not one per slice
            gates = torch.tanh(torch.baddbmm(step, h, w_hh_t) * scale)                          # [k D, B, 4H]
            act = gates * half + shift              # sigmoid(x) = tanh(x / 2) / 2 + 1 / 2 for i, f, o; tanh for g
            i, f, g, o = act.chunk(4, dim=-1)
            c = f * c + i * g
            h = o * torch.tanh(c)
            outputs.append(h)
        out = torch.stack(outputs, 2).view(k, directions, batch, width, hidden)
        parts = [out[:, 0]] + ([_gather_time(out[:, 1], reverse)] if bidirectional else [])
        x = torch.cat(parts, dim=-1) * keep
        if between_layers is not None and layer < num_layers - 1:
            x = between_layers(x)
    return x
