"""The attack models of privacy-risks-language-model-embeddings: small MLPs trained with Adam on embeddings.

§IV-C stage 3: a classifier ``g`` from embedding to the secret's classes,
trained with the cross-entropy loss; stage 4: ``argmax g(z)``. Sizes,
activations and batch sizes are the paper's and are set by the callers
(§V-C for pattern reconstruction, §VI-C for keyword inference). Inputs are
standardised with the attacker's own training statistics (a detail the paper
leaves open; it changes no decision of a linear or sigmoid model that could
not learn the same scaling, it only makes Adam's default step fit every encoder).
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from ..finite import require_finite


def as_embeddings(values: object, *, what: str, dim: int | None = None, rows: int | None = None) -> np.ndarray:
    """``values`` as a finite float32 ``[N, d]`` array, or a clear error naming ``what`` and the fix."""
    arr = np.asarray(values)
    if arr.dtype.kind not in "fiu" or arr.ndim != 2:
        raise ValueError(f"{what} must be a 2-D float array [N, d] (encode(texts) -> np.ndarray), got shape "
                         f"{arr.shape} of dtype {arr.dtype}; fix: return one row per text from encode()")
    if rows is not None and arr.shape[0] != rows:
        raise ValueError(f"{what} has {arr.shape[0]} rows for {rows} texts; fix: encode() must return one row per "
                         "text, in order")
    if dim is not None and arr.shape[1] != dim:
        raise ValueError(f"{what} has {arr.shape[1]} columns but earlier embeddings had {dim}; fix: the encoder must "
                         "return the same dimension for every text")
    require_finite(arr, what=what, fix="check the encoder's weights and inputs for NaN/inf; load it in float32 or "
                   "bfloat16 instead of float16")
    return arr.astype(np.float32, copy=False)


def encode(encoder: object, texts: Sequence[str], *, what: str, dim: int | None = None) -> np.ndarray:
    """``encoder.encode(texts)`` checked: a finite ``[len(texts), d]`` float32 array."""
    fn = getattr(encoder, "encode", None)
    if not callable(fn):
        raise TypeError(f"encoder must have encode(texts) -> np.ndarray [N, d] (the Encoder protocol), got "
                        f"{type(encoder).__name__}; fix: pytest_privleak.adapters.from_transformers(model, tokenizer) "
                        "or a class with an encode method")
    return as_embeddings(fn(list(texts)), what=f"{what} ({type(encoder).__name__}.encode)", dim=dim, rows=len(texts))


def mlp(d_in: int, hidden: Sequence[int], d_out: int, *, seed: int, batch_norm: bool = False,
        activation: type[nn.Module] = nn.Sigmoid) -> nn.Sequential:
    """``d_in - hidden... - d_out`` with sigmoid hidden units (optionally batch norm before each), initialised from ``seed``.

    The initialisation draws from its own seeded stream (the global torch
    generator is left as it was), so a fixed seed gives the same attack twice.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return _layers(d_in, hidden, d_out, batch_norm, activation)


def _layers(d_in: int, hidden: Sequence[int], d_out: int, batch_norm: bool, activation: type[nn.Module]) -> nn.Sequential:
    layers: list[nn.Module] = []
    width = d_in
    for h in hidden:
        layers.append(nn.Linear(width, h))
        if batch_norm:
            layers.append(nn.BatchNorm1d(h))
        layers.append(activation())
        width = h
    layers.append(nn.Linear(width, d_out))
    return nn.Sequential(*layers)


class Standardiser:
    """``(z - mean) / std`` with the statistics of the attacker's training embeddings."""

    def __init__(self, z: np.ndarray) -> None:
        x = torch.as_tensor(z, dtype=torch.float32)
        self.mean = x.mean(dim=0)
        self.std = x.std(dim=0).clamp_min(1e-6)

    def __call__(self, z: np.ndarray | torch.Tensor) -> torch.Tensor:
        return (torch.as_tensor(z, dtype=torch.float32) - self.mean) / self.std


def train_classifier(net: nn.Module, x: torch.Tensor, y: torch.Tensor, *, steps: int, batch: int, seed: int,
                     lr: float = 1e-3, loss: str = "cross-entropy", weight_decay: float = 0.0) -> nn.Module:
    """``steps`` Adam steps on random mini-batches of ``batch`` rows; ``loss`` is cross-entropy or hinge.

    Hinge: the multi-class margin loss of a linear SVM (Crammer-Singer form as
    torch's ``multi_margin_loss``), used when the attack asks for an SVM.
    """
    generator = torch.Generator().manual_seed(seed)
    optimiser = torch.optim.Adam(net.parameters(), lr=lr, weight_decay=weight_decay)
    net.train()
    n = x.shape[0]
    for _ in range(steps):
        rows = torch.randint(0, n, (min(batch, n),), generator=generator)
        out = net(x[rows])
        if loss == "hinge":
            value = nn.functional.multi_margin_loss(out, y[rows])
        else:
            value = nn.functional.cross_entropy(out, y[rows])
        optimiser.zero_grad()
        value.backward()
        optimiser.step()
    net.eval()
    return net


@torch.no_grad()
def predict(net: nn.Module, x: torch.Tensor, *, what: str) -> torch.Tensor:
    """Logits of ``net`` on ``x`` (eval mode), refused when non-finite."""
    out = net(x)
    require_finite(out, what=what, fix="the attack model diverged on these embeddings; check them for extreme values")
    return out
