"""A torch recurrent layer over many sentences that share a prefix: the prefix read once (issue 35 item 4).

Exposure (the Secret Sharer, quoted as eq. 1 of d-exposure-discriminative §2)
scores every secret of a canary's space, ``|V0|^n`` sentences
``p_1..p_m s_1..s_n`` with one prefix. A recurrent layer reads left to right,
so its state after ``p`` is the same for every candidate, and its state after
``p s_1..s_j`` is the same for every candidate that starts with ``s_1..s_j``:
:func:`prefix_outputs` runs the prefix once and each distinct run of leading
secret words once (a trie: a batch of 4096 consecutive 6-digit secrets feeds
about 4550 one-word steps instead of 4096 x 10). The backward direction of a
bidirectional layer reads right to left: its states over the secret are
shared by candidates that end alike, and over the prefix they depend on the
whole secret, so that part runs once per distinct candidate.

The outputs are those the layer gives the whole sentences (the same
arithmetic in steps: equal to float resolution; the sample project's GRU:
``tests/test_recurrent_prefix.py``). Supported: ``nn.GRU``, ``nn.LSTM`` and
``nn.RNN``, one layer or several, either ``batch_first``; a bidirectional
stack of several layers (whose second layer reads the backward states of
the whole sentence everywhere) and an LSTM with ``proj_size`` run on the
whole sentences instead, with the same outputs.
"""
from __future__ import annotations

from typing import Any

import torch
from torch import nn

__all__ = ["prefix_outputs"]

State = Any  # a hidden-state tensor [layers, rows, H], or an LSTM's (h, c) pair of them


def _run(module: nn.RNNBase, inputs: torch.Tensor, state: State | None) -> tuple[torch.Tensor, State]:
    """``module(inputs, state)`` with ``inputs`` and the outputs batch first, whatever the module's layout."""
    if module.batch_first:
        return module(inputs, state)
    outputs, state = module(inputs.transpose(0, 1), state)
    return outputs.transpose(0, 1), state


def _rows(state: State, index: torch.Tensor) -> State:
    """The hidden state of rows ``index`` (the batch is dim 1 of a state)."""
    if isinstance(state, tuple):
        return tuple(part[:, index] for part in state)
    return state[:, index]


def _one_direction(rnn: nn.RNNBase, suffix: str) -> nn.RNNBase:
    """A one-layer, one-direction copy of ``rnn``'s layer 0 in the direction ``suffix`` ('' or '_reverse')."""
    options = {"nonlinearity": rnn.nonlinearity} if isinstance(rnn, nn.RNN) else {}
    copy = type(rnn)(rnn.input_size, rnn.hidden_size, num_layers=1, bias=rnn.bias, batch_first=True,
                     **options)
    weights = {name: getattr(rnn, f"{name}_l0{suffix}") for name in
               (("weight_ih", "weight_hh", "bias_ih", "bias_hh") if rnn.bias else ("weight_ih", "weight_hh"))}
    copy.load_state_dict({f"{name}_l0": value.detach() for name, value in weights.items()})
    return copy.to(device=weights["weight_ih"].device, dtype=weights["weight_ih"].dtype).eval()


def _trie(module: nn.RNNBase, word_inputs: torch.Tensor, columns: torch.Tensor, start: State | None,
          ) -> tuple[torch.Tensor, State, torch.Tensor]:
    """``module`` stepped over ``columns [B, n]`` (word indices, in reading order) from ``start`` (one row, or
    None: zeros), each distinct run of leading words once.

    Returns the outputs ``[B, n, H]`` of every candidate, the states after the last column of the distinct
    candidates, and each candidate's row among them.
    """
    vocabulary = word_inputs.shape[0]
    batch, count = columns.shape
    row = torch.zeros(batch, dtype=torch.long, device=columns.device)    # every candidate starts at the root
    state, outputs = start, []
    for j in range(count):
        # a step's row is (its parent's row, its word): numbered below rows x |V|, so nothing overflows
        distinct, row = torch.unique(row * vocabulary + columns[:, j], return_inverse=True)
        parents, words = distinct // vocabulary, distinct % vocabulary
        out, state = _run(module, word_inputs[words].unsqueeze(1), None if state is None else _rows(state, parents))
        outputs.append(out[:, 0][row])
    return torch.stack(outputs, dim=1), state, row


@torch.no_grad()
def prefix_outputs(rnn: nn.RNNBase, prefix_inputs: torch.Tensor, word_inputs: torch.Tensor,
                   choices: torch.Tensor) -> torch.Tensor:
    """What ``rnn`` outputs for each sentence ``prefix + [word choices[b, 0], .., word choices[b, n-1]]``.

    ``prefix_inputs [m, d]``: the vectors ``rnn`` reads at the prefix's words
    (e.g. their embedding rows; ``m`` may be 0); ``word_inputs [|V|, d]``: the
    vector of each candidate word; ``choices [B, n]``: each candidate's words
    as indices into ``word_inputs``. Returns ``[B, m + n, D * H]`` batch first
    (``D`` = 2 for a bidirectional layer, forward then backward features, as
    ``rnn`` itself gives them), the outputs of ``rnn`` on the whole sentences
    from a zero initial state, with the prefix and each distinct run of
    leading (a backward direction: trailing) words computed once.
    """
    if not isinstance(rnn, nn.RNNBase):
        raise TypeError(f"rnn must be a torch recurrent layer (nn.GRU, nn.LSTM or nn.RNN), got {type(rnn).__name__}")
    choices = torch.as_tensor(choices, dtype=torch.long, device=word_inputs.device)
    if choices.dim() != 2 or choices.shape[1] < 1:
        raise ValueError(f"choices must be [B, n] indices into word_inputs, got shape {list(choices.shape)}; fix: "
                         "one row of word indices per candidate")
    if choices.numel() and not 0 <= int(choices.min()) <= int(choices.max()) < word_inputs.shape[0]:
        raise ValueError(f"choices hold indices outside word_inputs (0 .. {word_inputs.shape[0] - 1})")
    if prefix_inputs.dim() != 2 or word_inputs.dim() != 2 or prefix_inputs.shape[1] != word_inputs.shape[1]:
        raise ValueError(f"prefix_inputs [m, d] and word_inputs [|V|, d] must be matrices of one width d, got "
                         f"{list(prefix_inputs.shape)} and {list(word_inputs.shape)}")
    batch, m = choices.shape[0], prefix_inputs.shape[0]
    prefix_inputs = prefix_inputs.unsqueeze(0)
    if getattr(rnn, "proj_size", 0) or (rnn.bidirectional and rnn.num_layers > 1):
        sentences = torch.cat([prefix_inputs.expand(batch, -1, -1), word_inputs[choices]], dim=1)
        return _run(rnn, sentences, None)[0]
    forward = _one_direction(rnn, "") if rnn.bidirectional else rnn
    if m:
        before, state = _run(forward, prefix_inputs, None)
    else:
        before, state = prefix_inputs.new_zeros(1, 0, rnn.hidden_size), None
    after, _, _ = _trie(forward, word_inputs, choices, state)
    outputs = torch.cat([before.expand(batch, -1, -1), after], dim=1)
    if not rnn.bidirectional:
        return outputs
    backward = _one_direction(rnn, "_reverse")
    tail, state, row = _trie(backward, word_inputs, choices.flip(1), None)
    if m:
        rows = (state[0] if isinstance(state, tuple) else state).shape[1]     # the distinct whole secrets
        head, _ = _run(backward, prefix_inputs.flip(1).expand(rows, -1, -1), state)
        back = torch.cat([head[row].flip(1), tail.flip(1)], dim=1)
    else:
        back = tail.flip(1)
    return torch.cat([outputs, back], dim=2)
