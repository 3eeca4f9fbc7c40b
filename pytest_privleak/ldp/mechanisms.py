"""Local-DP mechanisms and the small protocol an auditor needs of them.

The protocol (what a user implements for their own encoder)::

    class MyEncoder:
        epsilon = 1.0                          # the claimed ε
        domain = BoxDomain(-10.0, 10.0, dim=1) # or FiniteDomain(values)
        def __call__(self, inputs, rng):       # inputs [N, *shape] -> outputs [N, out_dim]
            ...                                # bits or reals; one independent draw per row
        # optional, for the white-box exact ε of bit-product mechanisms:
        def bit_probabilities(self, inputs):   # [N, *shape] -> [N, bits] = Pr[bit = 1 | input]
            ...

``__call__`` must be vectorised over rows and draw all randomness from
``rng`` (a ``numpy.random.Generator``) so audits are reproducible.  The
domain tells the pair search which inputs are allowed.

Built in: OME (Lyu et al., SIGIR 2020, as restated in hoho-attack-ome-ldp
§2.1 / Theorem 2.1), SUE and OUE (Wang et al., USENIX Security 2017),
k-ary randomised response and the Laplace mechanism on a bounded box.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


# --- domains -----------------------------------------------------------------------------
@dataclass(frozen=True)
class BoxDomain:
    """Real inputs in ``[low, high]^dim``; inputs are arrays of shape ``[N, dim]``."""

    low: float
    high: float
    dim: int = 1

    def __post_init__(self) -> None:
        if not (math.isfinite(self.low) and math.isfinite(self.high)) or self.low >= self.high:
            raise ValueError(f"BoxDomain needs finite low < high, got low={self.low}, high={self.high}")
        if int(self.dim) < 1:
            raise ValueError(f"BoxDomain dim must be >= 1, got {self.dim}")

    @property
    def shape(self) -> tuple[int, ...]:
        return (int(self.dim),)

    def contains(self, x: np.ndarray) -> bool:
        x = np.asarray(x, dtype=float)
        return x.shape[-1:] == self.shape and bool(np.all((x >= self.low) & (x <= self.high)))

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return rng.uniform(self.low, self.high, size=(n, int(self.dim)))

    def anchors(self) -> np.ndarray:
        """Inputs with every coordinate at one point of interest: the ends, the middle, 0, 1, 2."""
        pts = [self.low, self.high, (self.low + self.high) / 2, 0.0, 1.0, 2.0]
        pts = sorted({float(p) for p in pts if self.low <= p <= self.high})
        return np.repeat(np.asarray(pts)[:, None], int(self.dim), axis=1)


@dataclass(frozen=True, eq=False)
class FiniteDomain:
    """A finite set of inputs: ``values`` has shape ``[K, *shape]`` (``[K]`` for scalars)."""

    values: np.ndarray

    def __post_init__(self) -> None:
        vals = np.asarray(self.values)
        if vals.ndim == 0 or len(vals) < 2:
            raise ValueError("FiniteDomain needs at least two values, e.g. FiniteDomain(np.arange(k))")
        object.__setattr__(self, "values", vals)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.values.shape[1:])

    def contains(self, x: np.ndarray) -> bool:
        return self.index(x) >= 0

    def index(self, x) -> int:
        """Position of ``x`` among the values, or -1; compares values as given (no cast that could truncate
        a longer string to the length of another)."""
        x = np.asarray(x)
        if x.shape != self.shape:
            return -1
        flat = self.values.reshape(len(self.values), -1)
        try:
            hits = np.flatnonzero(np.all(flat == x.reshape(1, -1), axis=1))
        except (TypeError, ValueError):  # values of another kind (a number against strings)
            return -1
        return int(hits[0]) if len(hits) else -1

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return self.values[rng.integers(0, len(self.values), size=n)]

    def anchors(self) -> np.ndarray:
        return self.values if len(self.values) <= 512 else self.values[:: math.ceil(len(self.values) / 512)]


Domain = BoxDomain | FiniteDomain


# --- protocol: defined once in protocols.py, re-exported here for users of this package ---
from ..protocols import BitProductMechanism, Mechanism  # noqa: E402,F401


def _check_epsilon(epsilon: float, name: str = "epsilon") -> float:
    eps = float(epsilon)
    if not (eps > 0 and math.isfinite(eps)):
        raise ValueError(f"{name} must be a positive finite number, got {epsilon!r}")
    return eps


class _BitProduct:
    """Shared sampling for bit-product mechanisms: bit i is 1 with ``bit_probabilities[:, i]``."""

    def bit_probabilities(self, inputs: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def __call__(self, inputs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        inputs = np.asarray(inputs)
        if len(inputs) > 1 and np.all(inputs == inputs[:1]):  # one input repeated: encode it once
            row = self.bit_probabilities(inputs[:1])
            probs = np.broadcast_to(row, (len(inputs), row.shape[1]))
        else:
            probs = self.bit_probabilities(inputs)
        # float64 uniforms (53-bit): float32 ones are multiples of 2^-24, so a bit probability like
        # OME's p_odd = 1/(1+λ^3) (1e-6 at λ=100, < 2^-24 for λ >= 256) would be sampled wrongly.
        return (rng.random(probs.shape) < probs).astype(np.uint8)


# --- OME ---------------------------------------------------------------------------------
class OME(_BitProduct):
    """Optimized Multiple Encoding (hoho-attack-ome-ldp §2.1, Theorem 2.1, eq. 1-2).

    Each of the ``r`` real values is written as ``l = m + n + 1`` bits: bit 0 the
    sign (1 for negative), then ``round(|x| * 2^n)`` in ``m + n`` bits, most
    significant first (clipped to the largest representable value).  Bit ``i``
    of the ``r*l``-bit string stays 1 with ``p = λ/(1+λ)`` at even ``i`` and
    ``1/(1+λ^3)`` at odd ``i``; a 0 becomes 1 with ``q = 1/(1 + λ e^{ε/(r l)})``.
    The claimed ε does not hold for λ > 1 (§3.2); this class reproduces the
    mechanism as published so audits can show it.
    """

    def __init__(self, lam: float, epsilon: float, *, m: int = 4, n: int = 5, r: int = 1,
                 low: float = -10.0, high: float = 10.0) -> None:
        if not lam > 0:
            raise ValueError(f"OME lam (λ) must be positive, got {lam!r}")
        if m < 0 or n < 0 or r < 1:
            raise ValueError(f"OME needs m >= 0, n >= 0, r >= 1; got m={m}, n={n}, r={r}")
        self.lam = float(lam)
        self.epsilon = _check_epsilon(epsilon)
        self.m, self.n, self.r = int(m), int(n), int(r)
        self.l = self.m + self.n + 1
        self.domain = BoxDomain(low, high, self.r)
        lam_ = self.lam
        self.q = 1.0 / (1.0 + lam_ * math.exp(self.epsilon / (self.r * self.l)))
        self.p_even = lam_ / (1.0 + lam_)
        self.p_odd = 1.0 / (1.0 + lam_ ** 3)
        idx = np.arange(self.r * self.l)
        self.p = np.where(idx % 2 == 0, self.p_even, self.p_odd)

    @property
    def bits_per_coordinate(self) -> int:
        return self.l

    def encode(self, inputs: np.ndarray) -> np.ndarray:
        """Clean (unperturbed) encoding, ``[N, r]`` reals -> ``[N, r*l]`` bits."""
        x = np.asarray(inputs, dtype=float).reshape(-1, self.r)
        sign = (x < 0).astype(np.uint8)
        mag = np.minimum(np.rint(np.abs(x) * 2.0 ** self.n), 2 ** (self.m + self.n) - 1).astype(np.int64)
        shifts = np.arange(self.m + self.n - 1, -1, -1)
        mag_bits = ((mag[..., None] >> shifts) & 1).astype(np.uint8)
        return np.concatenate([sign[..., None], mag_bits], axis=-1).reshape(len(x), self.r * self.l)

    def bit_probabilities(self, inputs: np.ndarray) -> np.ndarray:
        bits = self.encode(inputs)
        return np.where(bits == 1, self.p, self.q).astype(np.float64)

    def coordinate_candidates(self) -> np.ndarray:
        """One value per distinct per-coordinate encoding inside the domain (for exact worst case)."""
        scale = 2.0 ** self.n
        lo, hi = self.domain.low, self.domain.high
        k = np.arange(0, 2 ** (self.m + self.n))
        vals = np.concatenate([k / scale, -k / scale, [-0.25 / scale]])
        vals = vals[(vals >= lo) & (vals <= hi)]
        _, first = np.unique(self.encode(np.repeat(vals[:, None], self.r, axis=1))[:, : self.l],
                             axis=0, return_index=True)
        return np.sort(vals[first])

    def __repr__(self) -> str:
        return f"OME(lam={self.lam:g}, epsilon={self.epsilon:g}, m={self.m}, n={self.n}, r={self.r})"


# --- unary encodings (Wang et al. 2017) ----------------------------------------------------
class _UnaryEncoding(_BitProduct):
    """One-hot encoding of a value in ``{0..k-1}``; the set bit stays 1 w.p. p, others flip w.p. q."""

    name = "UE"
    p: float
    q: float

    def __init__(self, k: int, epsilon: float) -> None:
        if int(k) < 2:
            raise ValueError(f"{self.name} needs k >= 2 categories, got k={k}")
        self.k = int(k)
        self.epsilon = _check_epsilon(epsilon)
        self.domain = FiniteDomain(np.arange(self.k))

    def _categories(self, inputs: np.ndarray) -> np.ndarray:
        v = np.asarray(inputs).reshape(-1).astype(np.int64)
        if v.size and (v.min() < 0 or v.max() >= self.k):
            raise ValueError(f"{self.name} inputs must lie in 0..{self.k - 1}")
        return v

    def encode(self, inputs: np.ndarray) -> np.ndarray:
        v = self._categories(inputs)
        out = np.zeros((len(v), self.k), dtype=np.uint8)
        out[np.arange(len(v)), v] = 1
        return out

    def bit_probabilities(self, inputs: np.ndarray) -> np.ndarray:
        return np.where(self.encode(inputs) == 1, self.p, self.q).astype(np.float64)

    def __repr__(self) -> str:
        return f"{self.name}(k={self.k}, epsilon={self.epsilon:g})"


class SUE(_UnaryEncoding):
    """Symmetric unary encoding (basic RAPPOR): p = e^{ε/2}/(e^{ε/2}+1), q = 1 - p."""

    name = "SUE"

    def __init__(self, k: int, epsilon: float) -> None:
        super().__init__(k, epsilon)
        self.p = math.exp(self.epsilon / 2) / (math.exp(self.epsilon / 2) + 1)
        self.q = 1.0 / (math.exp(self.epsilon / 2) + 1)


class OUE(_UnaryEncoding):
    """Optimized unary encoding: p = 1/2, q = 1/(e^ε + 1)."""

    name = "OUE"

    def __init__(self, k: int, epsilon: float) -> None:
        super().__init__(k, epsilon)
        self.p = 0.5
        self.q = 1.0 / (math.exp(self.epsilon) + 1)


# --- k-ary randomised response -----------------------------------------------------------
class KRR:
    """k-ary randomised response: report the true value w.p. e^ε/(e^ε+k-1), else another uniformly.

    Outputs are the one-hot vector of the report (``[N, k]``), so a linear
    classifier on them can express any event over reports.
    """

    def __init__(self, k: int, epsilon: float) -> None:
        if int(k) < 2:
            raise ValueError(f"KRR needs k >= 2 categories, got k={k}")
        self.k = int(k)
        self.epsilon = _check_epsilon(epsilon)
        self.domain = FiniteDomain(np.arange(self.k))
        self.p_true = math.exp(self.epsilon) / (math.exp(self.epsilon) + self.k - 1)

    def __call__(self, inputs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        v = np.asarray(inputs).reshape(-1).astype(np.int64)
        keep = rng.random(len(v)) < self.p_true
        other = (v + rng.integers(1, self.k, size=len(v))) % self.k  # uniform over the k-1 others
        report = np.where(keep, v, other)
        out = np.zeros((len(v), self.k), dtype=np.uint8)
        out[np.arange(len(v)), report] = 1
        return out

    def __repr__(self) -> str:
        return f"KRR(k={self.k}, epsilon={self.epsilon:g})"


# --- Laplace on a bounded box ----------------------------------------------------------------
class BoundedLaplace:
    """Laplace mechanism on ``[low, high]^dim``: x + Lap(Δ/ε) per coordinate, Δ = dim·(high-low) (L1)."""

    def __init__(self, epsilon: float, *, low: float = 0.0, high: float = 1.0, dim: int = 1) -> None:
        self.epsilon = _check_epsilon(epsilon)
        self.domain = BoxDomain(low, high, dim)
        self.scale = int(dim) * (high - low) / self.epsilon

    def __call__(self, inputs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        x = np.asarray(inputs, dtype=float).reshape(-1, int(self.domain.dim))
        return x + rng.laplace(0.0, self.scale, size=x.shape)

    def __repr__(self) -> str:
        d = self.domain
        return f"BoundedLaplace(epsilon={self.epsilon:g}, low={d.low:g}, high={d.high:g}, dim={d.dim})"
