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
  are near bitwise complements, the witnesses of the largest leaks).  A
  finite domain of up to ``full_search`` (1000) inputs is screened in full:
  every input is a pair member, so a leak at one input of a hundred is found
  (see ``search``).
- memory and time: outputs are drawn and scored in chunks, scores computed
  in float32 (``classifier``), training rows capped for very wide outputs;
  ``time_budget`` bounds the run and a progress line reports long ones
  (``budget``).  A spent budget is reported, never hidden.
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
import warnings
from dataclasses import dataclass, field

import numpy as np
from scipy.stats import beta

from ..stats import clopper_pearson_lower, clopper_pearson_upper
from .budget import AuditClock, check_progress, check_time_budget
from .classifier import Scorer, check_classifier, train_rows, train_scorers, warm_up
from .diagnostics import LDPAuditWarning, warn_if_irreproducible
from .labels import mechanism_label
from .mechanisms import BoxDomain, FiniteDomain
from .sampling import draw_rows, output_chunks, sample_outputs
from .search import FULL_SEARCH_MAX, Candidates, probe_pairs, screen_pairs

__all__ = ["audit", "AuditResult", "choose_attack", "ThresholdAttack", "projected_bound", "count_event",
           "candidate_pairs", "validate_pairs", "sample_outputs", "train_scorers", "Scorer"]


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
    return sum(_in_event(out, scorer, attack, rng) for out in output_chunks(mechanism, x, n, rng))


def _in_event(out: np.ndarray, scorer: Scorer, attack: ThresholdAttack, rng: np.random.Generator) -> int:
    s = attack.sign * scorer(out)
    k = int(np.sum(s > attack.threshold))
    ties = int(np.sum(s == attack.threshold))
    return k + (ties if attack.gamma >= 1.0 else int(rng.binomial(ties, attack.gamma)) if ties else 0)


# --- pair search -------------------------------------------------------------------------
def candidate_pairs(mechanism, rng: np.random.Generator, *, pairs=None, full_search: int = FULL_SEARCH_MAX,
                    who: str = "", clock: AuditClock | None = None, **probe) -> list[tuple[np.ndarray, np.ndarray, str]]:
    """User pairs, patterns and probed pairs (every input screened on finite domains up to ``full_search``)."""
    return find_candidates(mechanism, rng, user=pairs or (), full_search=full_search, who=who, clock=clock,
                           **probe).pairs


def find_candidates(mechanism, rng, *, user=(), full_search: int = FULL_SEARCH_MAX, who: str = "",
                    clock: AuditClock | None = None, **probe) -> Candidates:
    """The search's candidates and how much of the domain it covered (see ``search``)."""
    domain = mechanism.domain
    pairs = [(np.asarray(a), np.asarray(b)) for a, b in user]
    if isinstance(domain, FiniteDomain) and len(domain.values) <= full_search:
        return screen_pairs(mechanism, rng, user=pairs, who=who, clock=clock)
    return probe_pairs(mechanism, rng, user=pairs, who=who, clock=clock, **probe)


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
    samples_requested: int = 0
    candidates: int = 0
    coverage: str = ""
    inputs_screened: int = 0
    domain_size: int | None = None
    train_rows: int = 0
    budget_note: str = ""
    ceiling_requested: float = math.nan
    shortfall: str = ""
    seconds_needed: float = math.nan

    @property
    def p1(self) -> float:
        return self.k1 / self.samples

    @property
    def p2(self) -> float:
        return self.k2 / self.samples

    @property
    def complete(self) -> bool:
        """True when the audit drew every sample asked for and tried every candidate pair."""
        return not self.budget_note


def _show(x: np.ndarray):
    return x.tolist() if isinstance(x, (np.ndarray, np.generic)) else x


def validate_pairs(mechanism, pairs, who: str = "") -> list[tuple[np.ndarray, np.ndarray]]:
    """User pairs as inputs of the mechanism's domain, each member kept as given (no truncation).

    On a finite domain each member is replaced by the domain's own entry that
    equals it, so ``("cat", "cats")`` stays two different inputs; an entry
    not in the domain, a pair of equal inputs, or a pair the mechanism cannot
    encode is refused with a ValueError naming the pair and the fix.
    """
    domain = mechanism.domain
    if pairs is None:
        return []
    if isinstance(pairs, (str, bytes)) or not hasattr(pairs, "__iter__"):
        raise ValueError(f"pairs must be a list of input pairs [(a, a'), ...], got {pairs!r}; fix: e.g. "
                         "pairs=[(0, 1)]")
    out = []
    for idx, pair in enumerate(pairs):
        if isinstance(pair, (str, bytes)) or not hasattr(pair, "__len__") or len(pair) != 2:
            raise ValueError(f"pairs[{idx}] must be a pair (a, a') of two inputs, got {pair!r}; fix: e.g. "
                             "pairs=[('red', 'cyan')]")
        members = []
        for name, x in zip(("a", "a'"), pair):
            if isinstance(domain, FiniteDomain):
                where = domain.index(x)
                if where < 0:
                    shown = ", ".join(repr(v) for v in domain.values[:8].tolist())
                    more = ", ..." if len(domain.values) > 8 else ""
                    raise ValueError(
                        f"pairs[{idx}] input {name}={_show(x)!r} is not in the mechanism's domain (FiniteDomain of "
                        f"{len(domain.values)} inputs: {shown}{more}); fix: pass inputs that are entries of "
                        "mechanism.domain.values, of the same shape")
                members.append(domain.values[where])
            else:
                try:
                    v = np.asarray(x, dtype=float)
                except (TypeError, ValueError):
                    raise ValueError(f"pairs[{idx}] input {name}={x!r} is not a number, but the mechanism's domain "
                                     f"is {domain!r}; fix: pass real inputs of shape {domain.shape}") from None
                if v.ndim == 0:
                    v = v.reshape(1)
                if not domain.contains(v):
                    raise ValueError(f"pairs[{idx}] input {name}={v.tolist()!r} is outside the mechanism's domain "
                                     f"{domain!r}; fix: pass inputs of shape {domain.shape} within "
                                     f"[{domain.low:g}, {domain.high:g}]")
                members.append(v)
        a, b = members
        if a.shape == b.shape and np.array_equal(a, b):
            raise ValueError(f"pairs[{idx}] = {_show(pair)!r} holds the same input twice, so it can show no privacy "
                             "loss; fix: pass two different inputs of the domain")
        try:
            np.asarray(mechanism(np.stack([a, b]) if a.dtype == b.dtype else np.asarray([a, b], dtype=object),
                                 np.random.default_rng(0)))
        except Exception as err:  # the user's mechanism refused: say which pair, keep its reason
            raise ValueError(f"mechanism {who or type(mechanism).__name__} cannot encode pairs[{idx}] = "
                             f"({_show(a)!r}, {_show(b)!r}): {type(err).__name__}: {err}; fix: pass inputs the "
                             "mechanism accepts, or make its __call__ accept every entry of its domain") from err
        out.append((a, b))
    return out


def check_replicates(replicates) -> int:
    if isinstance(replicates, bool) or not (isinstance(replicates, (int, np.integer)) and replicates >= 1):
        raise ValueError(f"replicates must be an integer >= 1, got {replicates!r}; fix: replicates=2 (the "
                         "default: a correct mechanism fails by bad luck with probability (1 - confidence)^2)")
    return int(replicates)


def check_full_search(full_search) -> int:
    if isinstance(full_search, bool) or not (isinstance(full_search, (int, np.integer)) and full_search >= 0):
        raise ValueError(f"full_search must be an integer >= 0 (finite domains up to that size have every input "
                         f"screened), got {full_search!r}; fix: e.g. full_search={FULL_SEARCH_MAX}")
    return int(full_search)


def audit(mechanism, *, confidence: float = 0.95, pairs=None, samples: int = 1_000_000,
          train_samples: int = 20_000, val_samples: int = 100_000, delta: float = 0.0,
          c: float | None = None, classifier: str = "logistic", search: bool = True,
          seed: int = 0, replicates: int = 2, time_budget: float | None = None,
          progress: float | None = 5.0, full_search: int = FULL_SEARCH_MAX, label: str | None = None) -> AuditResult:
    """Search pairs and attacks on independent samples, then bound ε on ``samples`` fresh ones per input.

    The final estimate is repeated ``replicates`` times on independent samples
    and the smallest bound is kept (see the module docstring: replication).
    ``time_budget`` (seconds): the search stops trying further pairs once half
    of it is used and the final estimate stops drawing when all of it is;
    the bound then rests on the samples drawn (a valid but weaker bound; the
    result says so and an :class:`LDPAuditWarning` is issued).  ``progress``:
    seconds between progress lines on stderr once the run is that long
    (``None``: silent).  ``full_search``: finite domains up to this size have
    every input screened as a pair member.
    """
    replicates = check_replicates(replicates)
    time_budget = check_time_budget(time_budget)
    progress = check_progress(progress)
    full_search = check_full_search(full_search)
    check_classifier(classifier)
    if not isinstance(mechanism.domain, (BoxDomain, FiniteDomain)):
        raise ValueError(f"mechanism.domain must be a BoxDomain or FiniteDomain from pytest_privleak.ldp, got "
                         f"{mechanism.domain!r}; fix: e.g. domain = FiniteDomain(np.arange(k))")
    who = label or mechanism_label(mechanism)
    user = validate_pairs(mechanism, pairs, who)
    warm_up()
    clock = AuditClock(who, time_budget=time_budget, progress=progress)
    probe_seq, search_seq, final_seq = np.random.SeedSequence(int(seed)).spawn(3)
    probe_rng, search_rng = np.random.default_rng(probe_seq), np.random.default_rng(search_seq)
    anchors = np.asarray(mechanism.domain.anchors())
    warn_if_irreproducible(mechanism, np.repeat(anchors[:4], 16, axis=0), who)
    if search:
        found = find_candidates(mechanism, probe_rng, user=user, full_search=full_search, who=who, clock=clock)
    else:
        if not user:
            raise ValueError("search=False needs at least one pair in `pairs`; fix: pass pairs=[(a, a')] or "
                             "search=True")
        found = Candidates()
        for a, b in user:
            found.add(a, b, "user")
        found.coverage = f"user pairs only (search=False): {len(found.pairs)}"
    cands = found.pairs
    screened_at = clock.elapsed
    width = sample_outputs(mechanism, cands[0][0], 1, search_rng, who).shape[1]
    n_train = train_rows(train_samples, width)
    clock.plan(clock.done + len(cands) * 2 * (n_train + val_samples) + replicates * 2 * samples)
    best, tried = _search(mechanism, cands, n_train=n_train, val_samples=val_samples, samples=samples,
                          confidence=confidence, delta=delta, c=c, classifier=classifier, seed=seed, rng=search_rng,
                          who=who, clock=clock, width=width)
    searched_at = clock.elapsed
    a, b, scorer, att = best
    if att.sign < 0:  # the event was chosen to favour b (b -> a loss): swap so p1 is measured on b
        a, b = b, a
        scorer_, sgn = scorer, -1.0
        scorer = lambda out: sgn * scorer_(out)  # noqa: E731
        att = ThresholdAttack(1.0, att.threshold, att.gamma, att.c, att.projected)
    counts, done = _final_counts(mechanism, a, b, scorer, att, samples=samples, replicates=replicates,
                                 final_seq=final_seq, width=width, who=who, clock=clock)
    tail = 1.0 - (1.0 - confidence) / 2.0
    estimates = []
    for k1, k2 in counts:  # independent fresh samples each; the smallest bound is reported
        p1_lo = clopper_pearson_lower(k1, done, tail)
        p2_hi = clopper_pearson_upper(k2, done, tail)
        estimates.append((_log_ratio(p1_lo - delta, p2_hi), k1, k2, p1_lo, p2_hi))
    lcb, k1, k2, p1_lo, p2_hi = min(estimates, key=lambda e: e[0])
    point = _log_ratio(k1 / done - delta, k2 / done)
    ceiling = _ceiling(done, tail, delta)
    notes = []
    if len(tried) < len(cands):
        notes.append(f"the search tried {len(tried)} of {len(cands)} candidate pairs")
    if done < samples:
        notes.append(f"the final estimate drew {done:,} of {samples:,} samples per input (ceiling "
                     f"{ceiling:.3g} instead of {_ceiling(samples, tail, delta):.3g})")
    budget_note = shortfall = ""
    seconds_needed = math.nan
    if notes:
        shortfall = f"time budget of {time_budget:g} s spent: " + "; ".join(notes)
        seconds_needed = _seconds_needed(screened_at, searched_at, clock.elapsed, tried=len(tried),
                                         pairs=len(cands), drawn=done, samples=samples)
        budget_note = (shortfall + ". The bound is valid at "
                       "the stated confidence but rests on less evidence than asked; fix: raise time_budget or "
                       "lower samples/val_samples")
        warnings.warn(LDPAuditWarning(f"LDP audit of {who}: {budget_note}"), stacklevel=2)
    clock.finish()
    return AuditResult(epsilon_lcb=max(0.0, lcb), point=point, a=a, b=b, k1=k1, k2=k2, samples=done,
                       p1_lower=p1_lo, p2_upper=p2_hi, c=att.c, confidence=confidence, ceiling=ceiling,
                       classifier=classifier, seconds=clock.elapsed, tried=tried,
                       replicate_bounds=[max(0.0, e[0]) for e in estimates], samples_requested=int(samples),
                       candidates=len(cands), coverage=found.coverage, inputs_screened=found.inputs_screened,
                       domain_size=found.domain_size, train_rows=n_train, budget_note=budget_note,
                       ceiling_requested=_ceiling(samples, tail, delta), shortfall=shortfall,
                       seconds_needed=seconds_needed)


def _search(mechanism, cands, *, n_train, val_samples, samples, confidence, delta, c, classifier, seed, rng, who,
            clock, width):
    """Train, validate and choose an attack for each candidate pair (in groups); the best by projected bound."""
    from .classifier import GROUP_ELEMENTS

    group = max(1, GROUP_ELEMENTS // max(1, 2 * n_train * width))
    best, tried = None, []
    for start in range(0, len(cands), group):
        chunk = cands[start:start + group]
        train = []
        for a, b, _ in chunk:
            train.append((sample_outputs(mechanism, a, n_train, rng, who), sample_outputs(mechanism, b, n_train, rng, who)))
            clock.advance(2 * n_train, "search (training)")
        scorers = train_scorers(train, kind=classifier, seed=int(seed) + start, who=who)
        del train
        for (a, b, source), scorer in zip(chunk, scorers):
            sa = _scores(mechanism, a, val_samples, scorer, rng, who, clock, width)
            sb = _scores(mechanism, b, val_samples, scorer, rng, who, clock, width)
            att = choose_attack(sa, sb, n_final=samples, confidence=confidence, delta=delta, c=c)
            tried.append({"a": _show(a), "b": _show(b), "source": source, "projected": round(att.projected, 4)})
            if best is None or att.projected > best[3].projected:
                best = (a, b, scorer, att)
            if clock.search_spent():
                return best, tried
    return best, tried


def _scores(mechanism, x, n, scorer, rng, who, clock, width) -> np.ndarray:
    """Classifier scores of ``n`` fresh outputs of M(x), drawn and scored chunk by chunk."""
    parts = []
    for out in output_chunks(mechanism, x, n, rng, who, width):
        parts.append(scorer(out))
        clock.advance(len(out), "search (validation)")
    return np.concatenate(parts)


def _final_counts(mechanism, a, b, scorer, att, *, samples, replicates, final_seq, width, who, clock):
    """Event counts ``[(k1, k2)] * replicates`` on independent streams, drawn in rounds of one chunk per stream.

    A round counts only when complete, so a spent time budget leaves every
    replicate and both inputs with the same number of samples (at least one
    round is always drawn).  Returns the counts and the samples drawn per input.
    """
    streams = [np.random.default_rng(s) for s in final_seq.spawn(2 * replicates)]  # a_0, b_0, a_1, b_1, ...
    counts = np.zeros(2 * replicates, dtype=np.int64)
    rows = draw_rows(width)
    done = 0
    while done < samples:
        take = min(rows, samples - done)
        this_round = np.zeros_like(counts)
        for i, rng in enumerate(streams):
            if done and clock.spent():
                return _pairs(counts, replicates), done
            out = sample_outputs(mechanism, a if i % 2 == 0 else b, take, rng, who)
            this_round[i] = _in_event(out, scorer, att, rng)
            clock.advance(take, "final estimate")
        counts += this_round
        done += take
        if clock.spent():
            break
    return _pairs(counts, replicates), done


def _seconds_needed(screened_at: float, searched_at: float, ended_at: float, *, tried: int, pairs: int, drawn: int,
                    samples: int) -> float:
    """Seconds the whole audit would take at this run's measured pace: the probe as it ran, the search at its
    seconds per pair tried for every candidate pair, the final estimate at its seconds per sample for all."""
    per_pair = (searched_at - screened_at) / max(tried, 1)
    per_sample = (ended_at - searched_at) / max(drawn, 1)
    return screened_at + per_pair * pairs + per_sample * samples


def _pairs(counts: np.ndarray, replicates: int) -> list[tuple[int, int]]:
    return [(int(counts[2 * r]), int(counts[2 * r + 1])) for r in range(replicates)]


def _ceiling(n: int, tail: float, delta: float) -> float:
    return _log_ratio(clopper_pearson_lower(n, n, tail) - delta, clopper_pearson_upper(0, n, tail))


def _log_ratio(num: float, den: float) -> float:
    if num <= 0:
        return -math.inf
    if den <= 0:
        return math.inf
    return math.log(num) - math.log(den)
