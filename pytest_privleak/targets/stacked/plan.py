"""Which models train together: the same stacked parameter shapes and the same batch shapes.

A stack holds models whose parameters have one shape once the
vocabulary-sized ones (word and character embedding tables, a language
model's output layer) are padded to a multiple of :data:`ROW_BUCKET` rows,
and whose batches have one shape (training-set size, padded sentence width).
The padding is a function of each model's own vocabulary, never of the
models it is stacked with, so a model trained alone is padded the same: the
rows past its vocabulary are never read, get no gradient and are cut off
when the model is unstacked. Seeds of one target always stack (one dataset);
reference models trained on different halves of a pool stack when their
vocabularies fall in the same bucket. Models that cannot stack train in
stacks of their own, with the same arithmetic.
"""
from __future__ import annotations

from collections.abc import Hashable, Sequence

from torch import nn

#: Vocabulary-sized parameters are stacked with their rows padded to a multiple of this.
ROW_BUCKET = 64


def padded_rows(rows: int) -> int:
    """``rows`` rounded up to a multiple of :data:`ROW_BUCKET`."""
    return -(-rows // ROW_BUCKET) * ROW_BUCKET


def stacked_shapes(net: nn.Module, vocabulary_sized: Sequence[str] = ()) -> dict[str, tuple[int, ...]]:
    """Each parameter's shape in a stack: the rows of those named in ``vocabulary_sized`` padded."""
    return {name: ((padded_rows(p.shape[0]), *p.shape[1:]) if name in vocabulary_sized else tuple(p.shape))
            for name, p in net.named_parameters()}


def stack_groups(nets: Sequence[nn.Module], shapes: Sequence[Hashable],
                 vocabulary_sized: Sequence[str] = ()) -> list[list[int]]:
    """Indices of ``nets`` grouped by their stacked parameter shapes and their batches' ``shapes`` (whatever
    fixes a model's batch shapes: training-set size, padded width), groups in order of first appearance."""
    groups: dict[tuple, list[int]] = {}
    for index, (net, shape) in enumerate(zip(nets, shapes)):
        key = (shape, tuple(stacked_shapes(net, vocabulary_sized).items()))
        groups.setdefault(key, []).append(index)
    return list(groups.values())
