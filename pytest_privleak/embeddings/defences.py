"""The four defences of privacy-risks-language-model-embeddings §VII, each a wrapped ``Encoder``.

A team tests the defended encoder with the same assertions as the raw one,
and measures the utility it keeps with :func:`~.utility.measure_utility`.

1. :func:`rounded` (§VII (1)): ``round(z, r)``, ``r`` decimals kept.
2. :func:`laplace_noise` (§VII (2), App. C): ``z + Lap(Δf / ε)^d``, with ``Δf``
   the ℓ1-sensitivity estimated as the largest ``||f(x) - f(x')||_1`` over
   10,000 pairs differing in one word (:func:`estimate_l1_sensitivity`).
3. :func:`privacy_preserving_mapping` (§VII (3), App. C): ``D_θ`` (a
   ``d-200-d`` ReLU MLP) trained against an imagined adversary ``A_ψ`` (a
   three-layer MLP, 200 sigmoid units) by simultaneous gradient steps on
   ``min_θ max_ψ -CE(A_ψ(D_θ(z)), s) + λ ||D_θ(z) - z||_2``, 1 adversary and
   5 mapping iterations in turn, batches of 64.
4. :func:`subspace_projection` (§VII (4), App. C): project out the first
   ``k = β d`` eigenvectors of the privacy subspace, then renormalise.
   Following [14] (Bolukbasi et al., whose method App. C adapts), each
   defining set is a pair of texts that differ only by the keyword (the word
   substitution trick of §VI-B), so the eigenvectors are the directions along
   which the keyword moves an embedding. (App. C's formula read with only two
   sets, "with" and "without" the keyword, would give the directions of
   largest variance *within* each set, which do not encode the keyword.)
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from ..finite import require_finite
from .describe import encoder_facts
from .training import encode, mlp
from .words import substitute_one, with_and_without


def _inner(encoder: Any) -> Any:
    if not callable(getattr(encoder, "encode", None)):
        raise TypeError(f"encoder must have encode(texts) -> np.ndarray [N, d] (the Encoder protocol), got "
                        f"{type(encoder).__name__}; fix: pass the encoder to defend")
    return encoder


def _identified(defence: "Defence", **inputs: Any) -> "Defence":
    """Give ``defence`` a content hash when its inner encoder has one (:mod:`pytest_privleak.cache.results`).

    The hash covers the inner encoder's hash, the defence's class and every
    input of its construction, so an attack on the same defended encoder is
    loaded from the result cache. A defence whose outputs depend on a random
    state consumed at each call (Laplace noise) gets none and is always
    attacked afresh, as is any defence of an encoder without a hash.
    """
    from ..cache.targets import content_hash
    from ..cache.results import mark_content_hash, model_hash

    inner = model_hash(defence.inner)
    if inner is None:
        return defence
    try:
        digest = content_hash({"defence": type(defence).__qualname__, "inner": inner, "inputs": inputs})
    except (TypeError, ValueError):
        return defence
    return mark_content_hash(defence, digest)


class Defence:
    """Base of the wrapped encoders: ``inner`` is the defended encoder; subclasses map its embeddings."""

    name = "defence"

    def __init__(self, inner: Any) -> None:
        self.inner = _inner(inner)

    def settings(self) -> dict[str, Any]:
        return {}

    def title(self) -> str:
        return f"{self.name}(" + ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                                           for k, v in self.settings().items()) + ")"

    def describe(self) -> dict[str, Any]:
        return {"defence": self.name, **self.settings(), "inner": encoder_facts(self.inner)}

    def privleak_state(self) -> dict[str, Any]:
        """What the output depends on besides the inner encoder and any torch module: the settings and a digest of
        every array (checked by the result cache, so changing them after construction voids the hash)."""
        import hashlib

        arrays = {k: hashlib.sha256(np.ascontiguousarray(v).tobytes()).hexdigest() + str(v.shape)
                  for k, v in sorted(vars(self).items()) if isinstance(v, np.ndarray)}
        plain = {k: v for k, v in sorted(vars(self).items()) if isinstance(v, (bool, int, float, str))
                 and not k.lstrip("_").startswith("privleak_")}     # not the hash and digest themselves
        return {"class": type(self).__qualname__, "settings": self.settings(), "plain": plain, "arrays": arrays}

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        z = encode(self.inner, texts, what="the embeddings to defend")
        out = self.apply(z)
        require_finite(out, what=f"the {self.name} defence's output", fix="check the defence's parameters")
        return out.astype(np.float32, copy=False)

    def apply(self, z: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError


class Rounded(Defence):
    """§VII (1): every coordinate rounded to ``decimals`` decimals."""

    name = "rounding"

    def __init__(self, inner: Any, decimals: int) -> None:
        super().__init__(inner)
        if isinstance(decimals, bool) or not isinstance(decimals, int) or decimals < 0:
            raise ValueError(f"decimals must be an integer >= 0 (decimals kept after rounding, §VII r), got "
                             f"{decimals!r}; fix: e.g. decimals=1")
        self.decimals = decimals

    def settings(self) -> dict[str, Any]:
        return {"decimals": self.decimals}

    def apply(self, z: np.ndarray) -> np.ndarray:
        return np.round(z, self.decimals)


def rounded(encoder: Any, decimals: int = 1) -> Rounded:
    """The rounding defence of §VII (1)."""
    return _identified(Rounded(encoder, decimals), decimals=decimals)


class LaplaceNoise(Defence):
    """§VII (2): ``z + (Y_1..Y_d)``, ``Y_i ~ Lap(0, sensitivity / epsilon)`` i.i.d., from a generator seeded once."""

    name = "laplace"

    def __init__(self, inner: Any, epsilon: float, sensitivity: float, seed: int = 0) -> None:
        super().__init__(inner)
        for arg, value in (("epsilon", epsilon), ("sensitivity", sensitivity)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
                raise ValueError(f"{arg} must be a finite number > 0, got {value!r}; fix: e.g. epsilon=1.0, and "
                                 "sensitivity from estimate_l1_sensitivity(encoder, texts)")
        self.epsilon, self.sensitivity = float(epsilon), float(sensitivity)
        self.rng = np.random.default_rng(seed)

    def settings(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon, "sensitivity": self.sensitivity}

    def apply(self, z: np.ndarray) -> np.ndarray:
        return z + self.rng.laplace(0.0, self.sensitivity / self.epsilon, size=z.shape)


def estimate_l1_sensitivity(encoder: Any, texts: Sequence[str], *, pairs: int = 10000, seed: int = 0) -> float:
    """App. C: the largest ``||f(x) - f(x')||_1`` over ``pairs`` pairs that differ in one word (one character for texts without spaces)."""
    if isinstance(texts, str) or not isinstance(texts, Sequence) or len(texts) == 0:
        raise ValueError("texts must be a non-empty list of texts like the ones to protect; fix: pass a sample "
                         "of them (e.g. generated citizen IDs or corpus sentences)")
    rng = np.random.default_rng(seed)
    chosen = [texts[i] for i in rng.integers(0, len(texts), pairs)]
    changed = substitute_one(chosen, rng)
    z = encode(encoder, chosen + changed, what="the embeddings of the sensitivity pairs")
    return float(np.abs(z[:pairs] - z[pairs:]).sum(axis=1).max())


def laplace_noise(encoder: Any, epsilon: float = 1.0, *, sensitivity: float | None = None,
                  texts: Sequence[str] | None = None, pairs: int = 10000, seed: int = 0) -> LaplaceNoise:
    """The Laplace-mechanism defence of §VII (2); ``sensitivity`` is estimated from ``texts`` when not given."""
    if sensitivity is None:
        if texts is None:
            raise ValueError("laplace_noise needs sensitivity= or texts= to estimate it (App. C: 10,000 pairs that "
                             "differ in one word); fix: pass texts like the ones to protect")
        sensitivity = estimate_l1_sensitivity(encoder, texts, pairs=pairs, seed=seed)
    return LaplaceNoise(encoder, epsilon, sensitivity, seed=seed)


class SubspaceProjection(Defence):
    """§VII (4): ``ẑ = (z - U Uᵀ z) / ||z - U Uᵀ z||`` with ``U`` the privacy subspace's orthonormal basis ``[d, k]``."""

    name = "subspace"

    def __init__(self, inner: Any, basis: np.ndarray, beta: float) -> None:
        super().__init__(inner)
        self.basis = np.asarray(basis, dtype=np.float64)
        self.beta = float(beta)

    def settings(self) -> dict[str, Any]:
        return {"beta": self.beta, "k": int(self.basis.shape[1])}

    def apply(self, z: np.ndarray) -> np.ndarray:
        z = z.astype(np.float64)
        out = z - (z @ self.basis) @ self.basis.T
        return out / np.clip(np.linalg.norm(out, axis=1, keepdims=True), 1e-12, None)


def subspace_projection(encoder: Any, keywords: Sequence[str], texts: Sequence[str], *, beta: float = 0.01,
                        seed: int = 0) -> SubspaceProjection:
    """Fit the privacy subspace of ``keywords`` on ``texts`` (the defender's plaintexts) and project it out.

    ``beta``: the ratio ``k / d`` of §VII (4) (at least one direction); the
    paper finds 1 % enough to bring DANN to chance on most models.
    """
    from .keywords import check_keywords

    keywords = check_keywords(keywords)
    if isinstance(beta, bool) or not isinstance(beta, (int, float)) or not 0 < beta < 1:
        raise ValueError(f"beta must be a ratio in (0, 1) (privacy subspace dimension / d), got {beta!r}; fix: "
                         "e.g. beta=0.01")
    rng = np.random.default_rng(seed)
    diffs = []
    for keyword in keywords:
        with_k, without_k = with_and_without(list(texts), keyword, rng)
        z = encode(encoder, with_k + without_k, what=f"the embeddings of the {keyword!r} substitution pairs")
        diffs.append(z[:len(with_k)] - z[len(with_k):])
    d = np.concatenate(diffs).astype(np.float64)
    # each pair {z1, z2} is a defining set: sum over it of (z - mu)(z - mu)^T = (z1 - z2)(z1 - z2)^T / 2
    scatter = d.T @ d / 2.0
    values, vectors = np.linalg.eigh(scatter)
    k = max(1, int(round(beta * d.shape[1])))
    return _identified(SubspaceProjection(encoder, vectors[:, ::-1][:, :k], beta), keywords=list(keywords),
                       texts=list(texts), beta=float(beta), seed=seed)


class PrivacyPreservingMapping(Defence):
    """§VII (3): ``ẑ = D_θ(z)``, a trained ``d-200-d`` ReLU MLP."""

    name = "ppm"

    def __init__(self, inner: Any, mapping: nn.Module, lam: float, distortion: float) -> None:
        super().__init__(inner)
        self.mapping = mapping.eval()
        self.lam = float(lam)
        #: mean ||D(z) - z||_2 on the defender's training embeddings
        self.distortion = float(distortion)

    def settings(self) -> dict[str, Any]:
        return {"lambda": self.lam, "distortion": self.distortion}

    @torch.no_grad()
    def apply(self, z: np.ndarray) -> np.ndarray:
        return self.mapping(torch.as_tensor(z, dtype=torch.float32)).numpy()


def privacy_preserving_mapping(encoder: Any, texts: Sequence[str], secrets: Sequence[int] | np.ndarray, *,
                               lam: float = 0.01, steps: int = 600, seed: int = 0) -> PrivacyPreservingMapping:
    """Train the PPM of §VII (3) on the defender's ``texts`` and their sensitive classes ``secrets``.

    ``lam``: the λ of the regularised minimax game (larger keeps the
    embeddings closer: more utility, less privacy). ``steps`` rounds, each 1
    adversary step then 5 mapping steps, batches of 64 (App. C). The paper
    sweeps λ; the default 0.01 is where, on the tiny test encoder, the white-box
    attack on *leg* fell from 0.96 to 0.62 (mean distortion 0.07); at 0.001
    the game oscillated (distortion 3.3) and the attack kept 0.86, so check
    the defended encoder with the assertion rather than trusting a λ.
    """
    if isinstance(lam, bool) or not isinstance(lam, (int, float)) or not lam >= 0:
        raise ValueError(f"lam must be a number >= 0 (the λ of §VII (3)), got {lam!r}; fix: e.g. lam=1.0")
    y = torch.as_tensor(np.asarray(secrets), dtype=torch.long)
    if y.ndim != 1 or len(y) != len(texts) or len(y) < 2:
        raise ValueError(f"secrets must hold one class index per text ({len(texts)}), got shape {tuple(y.shape)}; "
                         "fix: e.g. the birth years of the texts as integers")
    z = torch.as_tensor(encode(encoder, texts, what="the embeddings the PPM learns to protect"))
    d, classes = z.shape[1], int(y.max()) + 1
    mapping = mlp(d, (200,), d, seed=seed, activation=nn.ReLU)
    adversary = mlp(d, (200,), classes, seed=seed + 1)
    opt_map = torch.optim.Adam(mapping.parameters(), lr=1e-3)
    opt_adv = torch.optim.Adam(adversary.parameters(), lr=1e-3)
    generator = torch.Generator().manual_seed(seed)
    ce = nn.functional.cross_entropy
    for _ in range(steps):
        rows = torch.randint(0, len(z), (64,), generator=generator)
        loss = ce(adversary(mapping(z[rows]).detach()), y[rows])
        opt_adv.zero_grad()
        loss.backward()
        opt_adv.step()
        for _ in range(5):
            rows = torch.randint(0, len(z), (64,), generator=generator)
            mapped = mapping(z[rows])
            loss = -ce(adversary(mapped), y[rows]) + lam * (mapped - z[rows]).norm(dim=1).mean()
            opt_map.zero_grad()
            loss.backward()
            opt_map.step()
    with torch.no_grad():
        distortion = float((mapping(z) - z).norm(dim=1).mean())
    require_finite(distortion, what="the PPM's distortion after training", fix="use a larger lam or fewer steps")
    return _identified(PrivacyPreservingMapping(encoder, mapping, lam, distortion), texts=list(texts),
                       secrets=np.asarray(secrets).tolist(), lam=float(lam), steps=steps, seed=seed)
