"""Black-box ε lower bound for a mechanism, in the manner of DP-Sniper (Bichsel et al., S&P 2021).

For a candidate input pair (a, b): a classifier trained on mechanism outputs
to tell M(a) from M(b) (logistic regression as in DP-Sniper; optionally a
small MLP) ranks outputs; a threshold attack S = {score > t} (ties at t kept
with probability γ, as DP-Sniper's randomised threshold) is an event whose probabilities
p1 = Pr[M(a) ∈ S] and p2 = Pr[M(b) ∈ S] are then estimated on fresh samples,
giving ε_lcb = ln(p1_lower - δ) - ln(p2_upper) with one-sided Clopper-Pearson
bounds, each at 1 - (1 - confidence)/2 (union bound over the two).

Where we depart from DP-Sniper, and why:

- c: DP-Sniper fixes Pr[M(b) ∈ S] = c = 0.01, which caps its bound at
  ln(1/c) = 4.6.  We choose the threshold adaptively: on validation samples
  we pick the t that maximises the bound projected to the final sample count,
  so a large leak can be certified up to about ln(N / 3.7).  ``c=0.01``
  reproduces DP-Sniper's choice for comparison.
- pairs: besides DP-Sniper-style patterns and user pairs, the search probes
  the domain (its ends, middle and random points), measures how far apart
  the mean outputs are, and tries the widest pairs (for bit encoders these
  are near bitwise complements, the witnesses of the largest leaks).
- replication: the chosen event is estimated on ``replicates`` (default 2)
  independent fresh sample sets and ε_lcb is the smallest of their bounds.
  Each is a valid lower bound at ``confidence``, so their minimum is too;
  a correct mechanism is then over-bounded only if every replicate is, with
  probability at most (1 - confidence)^replicates.  Without it a mechanism
  whose best event is exactly tight (OUE: Pr ratio of {bit_a=1, bit_b=0} is
  exactly e^ε) and whose p2 is small fails by bad luck about (1 - confidence)/2
  of the time (measured: 2 of 100 seeds), the false alarm the assertion must
  not raise.  The final sampling is cheap next to the search (~0.1 s per
  10^6 outputs of OME), so the second replicate costs little.

Selection (pair, orientation, threshold) uses samples independent of the
final estimate, so only the two bounds of each replicate need the union bound.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import torch
from scipy.stats import beta

from ..stats import clopper_pearson_lower, clopper_pearson_upper
from .mechanisms import BoxDomain, FiniteDomain

_MAX_CHUNK_ELEMENTS = 1 << 23


# --- sampling ----------------------------------------------------------------------------
def sample_outputs(mechanism, x: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` outputs of ``mechanism`` on input ``x`` as ``[n, out_dim]``; rejects NaN/inf."""
    inputs = np.repeat(np.asarray(x)[None], n, axis=0)
    return _checked(mechanism(inputs, rng), n, mechanism)


def _checked(out, n: int, mechanism) -> np.ndarray:
    out = np.asarray(out)
    if out.shape[:1] != (n,):
        raise ValueError(f"mechanism {mechanism!r} returned {out.shape[:1]} rows for {n} inputs; "
                         "__call__(inputs, rng) must return one output row per input row")
    out = out.reshape(n, -1)
    if out.dtype.kind == "f" and not np.all(np.isfinite(out)):
        raise ValueError(f"mechanism {mechanism!r} returned NaN or inf outputs; it must return finite "
                         "numbers (check its noise scale and input range)")
    return out


# --- classifiers -------------------------------------------------------------------------
Scorer = Callable[[np.ndarray], np.ndarray]


def train_scorers(pairs_outputs: list[tuple[np.ndarray, np.ndarray]], *, kind: str = "logistic",
                  l2: float = 1e-4, seed: int = 0) -> list[Scorer]:
    """Fit one classifier per pair ("came from a"), all pairs batched in one L-BFGS run.

    Logistic regression (DP-Sniper's default) on standardised features; for
    bit-product mechanisms the true log-likelihood ratio is linear in the
    bits, so it is the optimal attack family there.  ``kind="mlp"`` adds one
    hidden layer of 16 tanh units for outputs whose likelihood ratio is not
    monotone in a linear score.  The losses of the pairs are independent, so
    minimising their sum fits each pair.  Runs single-threaded (small
    problems; the machine is shared) and restores torch's thread count.
    """
    if kind not in ("logistic", "mlp"):
        raise ValueError(f"classifier must be 'logistic' or 'mlp', got {kind!r}")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        per_pair = max(1, pairs_outputs[0][0].size * 2)
        group = max(1, _MAX_CHUNK_ELEMENTS // per_pair)
        scorers: list[Scorer] = []
        for start in range(0, len(pairs_outputs), group):
            scorers += _train_group(pairs_outputs[start:start + group], kind, l2, seed + start)
        return scorers
    finally:
        torch.set_num_threads(threads)


def _train_group(group, kind: str, l2: float, seed: int) -> list[Scorer]:
    x = torch.stack([torch.cat([torch.as_tensor(a, dtype=torch.float32), torch.as_tensor(b, dtype=torch.float32)])
                     for a, b in group])  # [P, 2n, D]
    n_a = len(group[0][0])
    y = torch.zeros(x.shape[:2])
    y[:, :n_a] = 1.0
    mu = x.mean(1, keepdim=True)
    sd = x.std(1, keepdim=True)
    sd = torch.where(sd > 1e-6, sd, torch.ones_like(sd))
    z = (x - mu) / sd
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

    opt = torch.optim.LBFGS(params, lr=1.0, max_iter=60,
                            line_search_fn="strong_wolfe")

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
        if kind == "logistic":  # fold the standardisation into one weight vector; plain numpy matmul
            w = (ps[0][0, :, 0] / sd64[i, 0]).numpy()
            b = float(ps[1].reshape(()) - (mu64[i, 0] / sd64[i, 0] * ps[0][0, :, 0]).sum())
            return lambda out: np.round(np.asarray(out, dtype=np.float64) @ w + b, 9)

        def score(out: np.ndarray) -> np.ndarray:
            with torch.no_grad():
                zz = (torch.as_tensor(out, dtype=torch.float64)[None] - mu64[i:i + 1]) / sd64[i:i + 1]
                s = forward(zz, ps)[0].numpy()
            return np.round(s, 9)  # equal outputs get exactly equal scores (ties matter for discrete outputs)

        return score

    return [make(i) for i in range(n_pairs)]


# --- threshold attacks -------------------------------------------------------------------
@dataclass
class ThresholdAttack:
    """S = {sign·score > t} ∪ {sign·score == t, kept w.p. γ}; ``c`` = validation Pr[S] under the
    disfavoured input (b for sign = +1, a for sign = -1)."""

    sign: float
    threshold: float
    gamma: float
    c: float
    projected: float


def _count(scores_sorted: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Counts of scores > t and == t for each threshold in ``t``."""
    n = len(scores_sorted)
    right = np.searchsorted(scores_sorted, t, side="right")
    left = np.searchsorted(scores_sorted, t, side="left")
    return n - right, right - left


def projected_bound(k1, k2, n_val: int, n_final: int, confidence: float, delta: float) -> np.ndarray:
    """ε_lcb expected at ``n_final`` samples from validation counts (used only to choose an attack).

    The validation frequencies are first replaced by their own Clopper-Pearson
    bounds at the final confidence (p1 low, p2 high), so thresholds that rest
    on a handful of validation hits, or an event never seen under b, are not
    over-rated; then the final bound is computed as if those were the truth.
    """
    tail = 1.0 - (1.0 - confidence) / 2.0
    k1 = np.asarray(k1, dtype=float)
    k2 = np.asarray(k2, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        p1 = np.where(k1 > 0, beta.ppf(1 - tail, np.maximum(k1, 1e-12), n_val - k1 + 1), 0.0)
        p2 = np.where(k2 < n_val, beta.ppf(tail, k2 + 1, np.maximum(n_val - k2, 1e-12)), 1.0)
        e1 = p1 * n_final
        e2 = np.minimum(p2 * n_final, n_final - 1)
        lo = np.where(e1 > 0, beta.ppf(1 - tail, np.maximum(e1, 1e-12), n_final - e1 + 1), 0.0)
        hi = beta.ppf(tail, e2 + 1, n_final - e2)
        return np.nan_to_num(np.log(np.maximum(lo - delta, 0.0)) - np.log(hi), nan=-np.inf)


def choose_attack(scores_a: np.ndarray, scores_b: np.ndarray, *, n_final: int, confidence: float,
                  delta: float, c: float | None) -> ThresholdAttack:
    """Best threshold attack for both directions of privacy loss; adaptive (``c=None``) or fixed c.

    sign = +1 bounds the a -> b loss: S = {score > t}, numerator from a's
    scores, c and the denominator from b's.  sign = -1 bounds the b -> a loss:
    S = {-score > t} (outputs the classifier attributes to b), numerator from
    b's scores, c and the denominator from a's; the caller then swaps a and b
    so that p1 is measured on the favoured input.  ε-LDP bounds both ratios,
    so both are searched; one classifier serves both (its score ranks a over b).
    In the loop below ``sa`` is always the numerator side, ``sb`` the denominator side.
    """
    best: ThresholdAttack | None = None
    for sign, sa, sb in ((1.0, scores_a, scores_b), (-1.0, -scores_b, -scores_a)):
        sa, sb = np.sort(sa), np.sort(sb)
        nv = len(sb)
        if c is None:
            levels = np.concatenate([1.0 - np.geomspace(0.5 / nv, 1.0, 400), np.linspace(0, 1, 101)])
            cand = np.unique(np.concatenate([np.quantile(sa, levels, method="lower"),
                                             np.quantile(sb, levels, method="lower"), sb[-1:] + 1e-6]))
            gt1, eq1 = _count(sa, cand)
            gt2, eq2 = _count(sb, cand)
            proj = projected_bound(gt1 + eq1, gt2 + eq2, len(sa), n_final, confidence, delta)
            i = int(np.argmax(proj))
            att = ThresholdAttack(sign, float(cand[i]), 1.0, float((gt2[i] + eq2[i]) / nv), float(proj[i]))
        else:
            t = sb[min(nv - 1, max(0, int(math.ceil((1.0 - c) * nv)) - 1))]
            gt2, eq2 = _count(sb, np.array([t]))
            gamma = float(np.clip((c * nv - gt2[0]) / max(eq2[0], 1), 0.0, 1.0))
            gt1, eq1 = _count(sa, np.array([t]))
            proj = projected_bound(gt1 + gamma * eq1, gt2 + gamma * eq2, len(sa), n_final, confidence, delta)
            att = ThresholdAttack(sign, float(t), gamma, float((gt2[0] + gamma * eq2[0]) / nv), float(proj[0]))
        if best is None or att.projected > best.projected:
            best = att
    assert best is not None
    return best


def count_event(mechanism, x: np.ndarray, n: int, scorer: Scorer, attack: ThresholdAttack,
                rng: np.random.Generator) -> int:
    """Number of ``n`` fresh outputs of M(x) that fall in the attack's event (chunked)."""
    first = sample_outputs(mechanism, x, min(n, 1024), rng)
    chunk = max(1024, _MAX_CHUNK_ELEMENTS // max(1, first.shape[1]))
    k, done, out = 0, 0, first
    while True:
        s = attack.sign * scorer(out)
        k += int(np.sum(s > attack.threshold))
        ties = int(np.sum(s == attack.threshold))
        k += ties if attack.gamma >= 1.0 else int(rng.binomial(ties, attack.gamma)) if ties else 0
        done += len(out)
        if done >= n:
            return k
        out = sample_outputs(mechanism, x, min(chunk, n - done), rng)


# --- pair search -------------------------------------------------------------------------
def candidate_pairs(mechanism, rng: np.random.Generator, *, pairs=None, probe_points: int = 256,
                    probe_samples: int = 64, widest: int = 6) -> list[tuple[np.ndarray, np.ndarray, str]]:
    """User pairs, DP-Sniper-style patterns, and the widest pairs found by probing the domain."""
    domain = mechanism.domain
    found: list[tuple[np.ndarray, np.ndarray, str]] = []
    seen: set = set()

    def add(a, b, source):
        a, b = np.asarray(a), np.asarray(b)
        if np.array_equal(a, b):
            return
        key = frozenset([a.tobytes(), b.tobytes()])
        if key not in seen:
            seen.add(key)
            found.append((a, b, source))

    for a, b in pairs or ():
        add(a, b, "user")
    anchors = np.asarray(domain.anchors())
    if isinstance(domain, BoxDomain):
        by_value = {float(v[0]): v for v in anchors}
        lo, hi, mid = domain.low, domain.high, (domain.low + domain.high) / 2
        for u, v in ((lo, hi), (1.0, 0.0), (1.0, 2.0), (lo, mid), (mid, hi)):
            if u in by_value and v in by_value:
                add(by_value[u], by_value[v], "pattern")
    else:
        add(anchors[0], anchors[1], "pattern")
        add(anchors[0], anchors[-1], "pattern")
    # Probe: mean outputs over the anchors and random points; the widest pairs are candidates.
    probes = np.concatenate([anchors, np.asarray(domain.sample(probe_points, rng))])
    inputs = np.repeat(probes, probe_samples, axis=0)
    outs = _checked(mechanism(inputs, rng), len(inputs), mechanism).astype(np.float64)
    means = outs.reshape(len(probes), probe_samples, -1).mean(axis=1)
    if np.all((outs == 0) | (outs == 1)):
        sm = (means * probe_samples + 0.5) / (probe_samples + 1)
        feats = np.log(sm) - np.log1p(-sm)  # log-odds: distance ~ sum of per-bit log-ratios
    else:
        feats = means / np.maximum(outs.std(axis=0), 1e-12)
    dist = np.zeros((len(probes), len(probes)))
    for start in range(0, len(probes), 128):
        dist[start:start + 128] = np.abs(feats[start:start + 128, None, :] - feats[None, :, :]).sum(-1)
    order = np.argsort(-dist, axis=None)
    added = 0
    for flat in order[: 50 * widest]:
        i, j = np.unravel_index(flat, dist.shape)
        before = len(found)
        add(probes[i], probes[j], "widest")
        added += len(found) - before
        if added >= widest:
            break
    return found


# --- the audit ---------------------------------------------------------------------------
@dataclass
class AuditResult:
    """ε lower bound from the best attack found, with what is needed to check it."""

    epsilon_lcb: float
    point: float
    a: np.ndarray
    b: np.ndarray
    k1: int
    k2: int
    samples: int
    p1_lower: float
    p2_upper: float
    c: float
    confidence: float
    ceiling: float
    classifier: str
    seconds: float
    tried: list[dict] = field(default_factory=list)
    replicate_bounds: list[float] = field(default_factory=list)

    @property
    def p1(self) -> float:
        return self.k1 / self.samples

    @property
    def p2(self) -> float:
        return self.k2 / self.samples


def validate_pairs(mechanism, pairs) -> list[tuple[np.ndarray, np.ndarray]]:
    """Check user pairs lie in the mechanism's domain; raise a ValueError naming the fix otherwise."""
    out = []
    for idx, pair in enumerate(pairs or ()):
        try:
            a, b = pair
        except (TypeError, ValueError):
            raise ValueError(f"pairs[{idx}] must be a pair (a, b) of inputs, got {pair!r}") from None
        a = np.asarray(a, dtype=float if isinstance(mechanism.domain, BoxDomain) else None)
        b = np.asarray(b, dtype=a.dtype)
        if isinstance(mechanism.domain, BoxDomain) and a.ndim == 0:
            a, b = a.reshape(1), b.reshape(1)
        for name, x in (("a", a), ("b", b)):
            if not mechanism.domain.contains(x):
                raise ValueError(f"pairs[{idx}] input {name}={x.tolist()!r} is outside the mechanism's domain "
                                 f"{mechanism.domain!r}; pass inputs of the domain's shape and range")
        out.append((a, b))
    return out


def audit(mechanism, *, confidence: float = 0.95, pairs=None, samples: int = 1_000_000,
          train_samples: int = 20_000, val_samples: int = 100_000, delta: float = 0.0,
          c: float | None = None, classifier: str = "logistic", search: bool = True,
          seed: int = 0, replicates: int = 2) -> AuditResult:
    """Search pairs and attacks on independent samples, then bound ε on ``samples`` fresh ones per input.

    The final estimate is repeated ``replicates`` times on independent samples
    and the smallest bound is kept (see the module docstring: replication).
    """
    started = time.perf_counter()
    if not (isinstance(replicates, (int, np.integer)) and replicates >= 1):
        raise ValueError(f"replicates must be an integer >= 1, got {replicates!r}")
    if not isinstance(mechanism.domain, (BoxDomain, FiniteDomain)):
        raise ValueError("mechanism.domain must be a BoxDomain or FiniteDomain from pytest_privleak.ldp")
    seq = np.random.SeedSequence(int(seed))
    probe_rng, search_rng, final_rng = (np.random.default_rng(s) for s in seq.spawn(3))
    user = validate_pairs(mechanism, pairs)
    if search:
        cands = candidate_pairs(mechanism, probe_rng, pairs=user)
    else:
        if not user:
            raise ValueError("search=False needs at least one pair in `pairs`")
        cands = [(a, b, "user") for a, b in user]
    train = [(sample_outputs(mechanism, a, train_samples, search_rng),
              sample_outputs(mechanism, b, train_samples, search_rng)) for a, b, _ in cands]
    scorers = train_scorers(train, kind=classifier, seed=int(seed))
    del train
    best = None
    tried = []
    for (a, b, source), scorer in zip(cands, scorers):
        sa = scorer(sample_outputs(mechanism, a, val_samples, search_rng))
        sb = scorer(sample_outputs(mechanism, b, val_samples, search_rng))
        att = choose_attack(sa, sb, n_final=samples, confidence=confidence, delta=delta, c=c)
        tried.append({"a": a.tolist(), "b": b.tolist(), "source": source, "projected": round(att.projected, 4)})
        if best is None or att.projected > best[3].projected:
            best = (a, b, scorer, att)
    a, b, scorer, att = best
    if att.sign < 0:  # the event was chosen to favour b (b -> a loss): swap so p1 is measured on b
        a, b = b, a
        scorer_, sgn = scorer, -1.0
        scorer = lambda out: sgn * scorer_(out)  # noqa: E731
        att = ThresholdAttack(1.0, att.threshold, att.gamma, att.c, att.projected)
    tail = 1.0 - (1.0 - confidence) / 2.0
    estimates = []
    for _ in range(replicates):  # independent fresh samples each; the smallest bound is reported
        k1 = count_event(mechanism, a, samples, scorer, att, final_rng)
        k2 = count_event(mechanism, b, samples, scorer, att, final_rng)
        p1_lo = clopper_pearson_lower(k1, samples, tail)
        p2_hi = clopper_pearson_upper(k2, samples, tail)
        estimates.append((_log_ratio(p1_lo - delta, p2_hi), k1, k2, p1_lo, p2_hi))
    lcb, k1, k2, p1_lo, p2_hi = min(estimates, key=lambda e: e[0])
    point = _log_ratio(k1 / samples - delta, k2 / samples)
    ceiling = _log_ratio(clopper_pearson_lower(samples, samples, tail) - delta,
                         clopper_pearson_upper(0, samples, tail))
    return AuditResult(epsilon_lcb=max(0.0, lcb), point=point, a=a, b=b, k1=k1, k2=k2, samples=samples,
                       p1_lower=p1_lo, p2_upper=p2_hi, c=att.c, confidence=confidence, ceiling=ceiling,
                       classifier=classifier, seconds=time.perf_counter() - started, tried=tried,
                       replicate_bounds=[max(0.0, e[0]) for e in estimates])


def _log_ratio(num: float, den: float) -> float:
    if num <= 0:
        return -math.inf
    if den <= 0:
        return math.inf
    return math.log(num) - math.log(den)
