"""Drawing mechanism outputs in bounded memory, with every output checked finite.

Outputs are kept in the mechanism's own dtype (``uint8`` bits stay one byte)
and drawn in chunks of about :data:`CHUNK_ELEMENTS` numbers, so a
10,000-bit mechanism never holds 10^5 rows at once.
"""
from __future__ import annotations

from typing import Iterator

import numpy as np

from ..finite import require_finite

#: Numbers (rows x output width) per chunk drawn from a mechanism: 4 Mi, i.e. 4 MB of bits or 32 MB of floats.
CHUNK_ELEMENTS = 1 << 22
#: Rows per call when drawing many outputs of one input: small enough that a slow mechanism (1 ms a row)
#: reports progress and meets a time budget every few seconds, large enough that per-call overhead is noise.
#: Fixed, not timed, so that the same seed draws the same outputs on any machine.
CHUNK_ROWS = 4096


def rows_per_chunk(width: int, *, at_least: int = 256) -> int:
    """Rows of ``width`` outputs that fit one chunk's memory."""
    return max(at_least, CHUNK_ELEMENTS // max(1, int(width)))


def draw_rows(width: int) -> int:
    """Rows per mechanism call when drawing in a stream: :data:`CHUNK_ROWS`, fewer for very wide outputs."""
    return max(1, min(CHUNK_ROWS, CHUNK_ELEMENTS // max(1, int(width))))


def checked(out, n: int, who: str) -> np.ndarray:
    """The mechanism's ``n`` outputs as ``[n, width]``; wrong row counts and NaN/inf are refused."""
    out = np.asarray(out)
    if out.shape[:1] != (n,):
        raise ValueError(f"mechanism {who} returned {out.shape[:1]} rows for {n} inputs; fix: __call__(inputs, "
                         "rng) must return one output row per input row")
    out = out.reshape(n, -1)
    if out.dtype.kind in "fcO":
        require_finite(out, what=f"outputs of mechanism {who}",
                       fix="the mechanism must return finite numbers: check its noise scale and input range")
    return out


def repeat_input(x: np.ndarray, n: int) -> np.ndarray:
    """``n`` copies of one input as a batch ``[n, *shape]`` (strings keep their own length)."""
    x = np.asarray(x)
    return np.repeat(x[None], n, axis=0)


def sample_outputs(mechanism, x: np.ndarray, n: int, rng: np.random.Generator, who: str = "") -> np.ndarray:
    """``n`` outputs of ``mechanism`` on input ``x`` as ``[n, width]`` in one call (small ``n`` only)."""
    return checked(mechanism(repeat_input(x, n), rng), n, who or type(mechanism).__name__)


def output_chunks(mechanism, x: np.ndarray, n: int, rng: np.random.Generator, who: str = "",
                  width: int | None = None) -> Iterator[np.ndarray]:
    """``n`` outputs of ``mechanism`` on ``x`` in chunks of bounded size (the stream is the same as one call
    for mechanisms that draw row by row)."""
    done = 0
    rows = CHUNK_ROWS if width is None else draw_rows(width)
    while done < n:
        take = min(rows, n - done)
        out = sample_outputs(mechanism, x, take, rng, who)
        rows = draw_rows(out.shape[1])
        done += take
        yield out
