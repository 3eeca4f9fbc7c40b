"""The classifiers that rank outputs for the threshold attack (DP-Sniper, Bichsel et al. S&P 2021, §5).

One classifier per candidate pair learns "came from a" vs "came from b".
Logistic regression is DP-Sniper's default; for bit-product mechanisms the
true log-likelihood ratio is linear in the bits, so it is the optimal attack
family there.  ``kind="mlp"`` adds one hidden layer of 16 tanh units.

Scoring runs in float32 and in chunks (memory bounded for 10,000-bit
outputs).  For integer outputs (bits, one-hot, counts) the weights are
rounded to a power-of-two grid fine enough to keep every float32 partial sum
exact, so equal outputs get exactly equal scores in any batch (ties matter
for discrete outputs); a chunk whose sums could leave that range is scored in
float64 instead.  Every score is checked finite.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np
import torch

from ..finite import require_finite
from .sampling import rows_per_chunk

#: Numbers (pairs x rows x width) fitted at once; a single pair larger than this is fitted alone.
GROUP_ELEMENTS = 1 << 23
#: Rows x width of training outputs per input beyond which the training rows are cut (memory bound).
TRAIN_ELEMENTS = 1 << 23

Scorer = Callable[[np.ndarray], np.ndarray]
OVERFLOW_FIX = ("the mechanism's outputs overflow the classifier (|output| near 1e38 or more): return outputs "
              "of moderate magnitude (e.g. rescale them) so that a classifier can be fitted")


_warm = False


def warm_up() -> None:
    """Build one optimizer so torch's one-off lazy imports (seconds on a loaded machine) happen before an
    audit's clock starts rather than inside its time budget."""
    global _warm
    if not _warm:
        torch.optim.LBFGS([torch.zeros(1, requires_grad=True)])
        _warm = True


def check_classifier(kind) -> str:
    if kind not in ("logistic", "mlp"):
        raise ValueError(f"classifier must be 'logistic' or 'mlp', got {kind!r}; fix: classifier='logistic' "
                         "(DP-Sniper's default) or 'mlp' for outputs whose likelihood ratio is not linear")
    return kind


def train_rows(train_samples: int, width: int) -> int:
    """Training outputs per input: ``train_samples`` unless that exceeds the memory bound for this width."""
    return int(min(train_samples, max(500, TRAIN_ELEMENTS // max(1, width))))


class LinearScorer:
    """``score(out) = out @ w + b`` in float32 chunks; exact (grid weights) for integer outputs."""

    def __init__(self, w: np.ndarray, b: float, x_max: np.ndarray, who: str) -> None:
        self.who = who
        self.b = float(b)
        scale = float(np.abs(w) @ np.maximum(np.asarray(x_max, dtype=np.float64), 1.0))
        self.quantum = 2.0 ** (math.ceil(math.log2(scale)) - 23) if scale > 0 and math.isfinite(scale) else 1.0
        self.w_grid = np.round(w / self.quantum) * self.quantum  # exact in float32: |w/q| < 2^24
        self.w32 = self.w_grid.astype(np.float32)
        self.w_float32 = w.astype(np.float32)

    def __call__(self, out: np.ndarray) -> np.ndarray:
        out = np.asarray(out)
        scores = np.empty(len(out), dtype=np.float64)
        rows = rows_per_chunk(out.shape[1] if out.ndim > 1 else 1)
        for start in range(0, len(out), rows):
            chunk = out[start:start + rows]
            integral = chunk.dtype.kind in "biu" or bool(np.all(chunk == np.rint(chunk)))
            if integral:
                bound = float(np.abs(chunk).max(axis=0).astype(np.float64) @ np.abs(self.w_grid))
                if bound < 2.0 ** 24 * self.quantum:
                    part = (chunk.astype(np.float32) @ self.w32).astype(np.float64)
                else:
                    part = chunk.astype(np.float64) @ self.w_grid
            else:
                with np.errstate(over="ignore", invalid="ignore"):  # an overflow is refused below, with the fix
                    part = (chunk.astype(np.float32) @ self.w_float32).astype(np.float64)
            scores[start:start + len(chunk)] = part + self.b
        require_finite(scores, what=f"the classifier's scores of outputs of mechanism {self.who}", fix=OVERFLOW_FIX)
        return scores


def train_scorers(pairs_outputs: list[tuple[np.ndarray, np.ndarray]], *, kind: str = "logistic",
                  l2: float = 1e-4, seed: int = 0, who: str = "") -> list[Scorer]:
    """Fit one classifier per pair ("came from a"), pairs batched in L-BFGS runs of bounded size.

    Features are standardised; the losses of the pairs are independent, so
    minimising their sum fits each pair.  Runs single-threaded (small
    problems; the machine is shared) and restores torch's thread count.
    """
    check_classifier(kind)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        per_pair = max(1, pairs_outputs[0][0].size * 2)
        group = max(1, GROUP_ELEMENTS // per_pair)
        scorers: list[Scorer] = []
        for start in range(0, len(pairs_outputs), group):
            scorers += _train_group(pairs_outputs[start:start + group], kind, l2, seed + start, who)
        return scorers
    finally:
        torch.set_num_threads(threads)


def _train_group(group, kind: str, l2: float, seed: int, who: str) -> list[Scorer]:
    with np.errstate(over="ignore"):  # outputs beyond float32 become inf here and are refused just below
        x = torch.stack([torch.cat([torch.as_tensor(np.asarray(a, dtype=np.float32)),
                                    torch.as_tensor(np.asarray(b, dtype=np.float32))]) for a, b in group])  # [P, 2n, D]
    require_finite(x, what=f"the outputs of mechanism {who or '?'} in float32 (the classifier's precision)",
                   fix=OVERFLOW_FIX)
    x_max = x.abs().amax(dim=1).double().numpy()
    n_a = len(group[0][0])
    y = torch.zeros(x.shape[:2])
    y[:, :n_a] = 1.0
    mu = x.mean(1, keepdim=True)
    sd = x.std(1, keepdim=True)
    require_finite(sd, what=f"the spread of the outputs of mechanism {who or '?'} (classifier standardisation)",
                   fix=OVERFLOW_FIX)
    sd = torch.where(sd > 1e-6, sd, torch.ones_like(sd))
    z = (x - mu) / sd
    del x
    n_pairs, _, dim = z.shape
    gen = torch.Generator().manual_seed(int(seed))
    if kind == "logistic":
        params = [torch.zeros(n_pairs, dim, 1), torch.zeros(n_pairs, 1, 1)]
    else:
        params = [torch.randn(n_pairs, dim, 16, generator=gen) / math.sqrt(dim), torch.zeros(n_pairs, 1, 16),
                  torch.randn(n_pairs, 16, 1, generator=gen) / math.sqrt(16), torch.zeros(n_pairs, 1, 1)]
    for p in params:
        p.requires_grad_(True)

    def forward(zz: torch.Tensor, ps) -> torch.Tensor:
        if kind == "logistic":
            return (torch.bmm(zz, ps[0]) + ps[1]).squeeze(-1)
        return (torch.bmm(torch.tanh(torch.bmm(zz, ps[0]) + ps[1]), ps[2]) + ps[3]).squeeze(-1)

    opt = torch.optim.LBFGS(params, lr=1.0, max_iter=60, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = torch.nn.functional.binary_cross_entropy_with_logits(forward(z, params), y, reduction="none")
        total = loss.mean(1).sum() + l2 * sum((p ** 2).sum() for p in params)
        total.backward()
        return total

    opt.step(closure)
    fitted = [p.detach().double() for p in params]
    mu64, sd64 = mu.double(), sd.double()

    def make(i: int) -> Scorer:
        ps = [p[i:i + 1] for p in fitted]
        if kind == "logistic":  # fold the standardisation into one weight vector
            w = (ps[0][0, :, 0] / sd64[i, 0]).numpy()
            b = float(ps[1].reshape(()) - (mu64[i, 0] / sd64[i, 0] * ps[0][0, :, 0]).sum())
            require_finite(w, what=f"the classifier's weights for mechanism {who or '?'}", fix=OVERFLOW_FIX)
            return LinearScorer(w, b, x_max[i], who or "?")

        def score(out: np.ndarray) -> np.ndarray:
            out = np.asarray(out)
            res = np.empty(len(out))
            step = rows_per_chunk(out.shape[1])
            with torch.no_grad():
                for s in range(0, len(out), step):
                    zz = (torch.as_tensor(out[s:s + step], dtype=torch.float64)[None] - mu64[i:i + 1]) / sd64[i:i + 1]
                    res[s:s + step] = forward(zz, ps)[0].numpy()
            res = np.round(res, 9)  # equal outputs get exactly equal scores (ties matter for discrete outputs)
            require_finite(res, what=f"the MLP classifier's scores of outputs of mechanism {who or '?'}",
                           fix=OVERFLOW_FIX)
            return res

        return score

    return [make(i) for i in range(n_pairs)]
