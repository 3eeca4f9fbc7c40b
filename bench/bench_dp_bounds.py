"""Benchmark of the one-run DP lower bounds (issue 25) against jax_privacy's ``CanaryScoreAuditor`` on the SAME
canary scores.

The canaries come from the Gaussian mechanism in place of training: each of m canaries is included with
probability 1/2 and scored N(μ, 1) when in, N(0, 1) when out, which is exactly μ-GDP per canary; μ is set
so that the true ε at δ = 1e-5 is 1, 4 or 8 (``dp_accounting.get_sigma_gaussian``).  Each row averages
``--seeds`` fixed seeds; every figure is measured in this run on this machine.

Columns: our f-DP bound (Mahloujifar et al. 2024, Gaussian curve), our f-DP bound with the (ε, δ) curve,
our Steinke et al. 2023 bound (all at confidence 0.95, Bonferroni over guess counts fixed by m), jax's
``epsilon_one_run_fdp`` and ``epsilon_one_run`` (significance 0.05, its default Bonferroni threshold
strategy), the ratios ours / jax (of the means), each bound / true ε, and the wall time of one audit
(ours computes all three bounds in one call; jax's two calls are timed together).

A second table runs randomised response (score = the inclusion bit, flipped w.p. 1/(1 + e^ε): exactly ε-DP,
true ε at δ = ln((p - δ)/(1 - p))) and counts the seeds whose bound exceeds the truth: the Gaussian-curve
f-DP reading (ours and jax's) is no (ε, δ) bound for a mechanism with a sharper curve.

Run: ``python bench/bench_dp_bounds.py [--seeds 5]``.  jax_privacy is a bench-only peer, loaded by file
path (its package __init__ needs chex).
"""
from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pytest_privleak.dp import fdp  # noqa: E402
from pytest_privleak.dp.one_run import audit_one_run  # noqa: E402

DELTA = 1e-5


def load_jax_auditing():
    spec = importlib.util.find_spec("jax_privacy")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / "auditing.py"
    module_spec = importlib.util.spec_from_file_location("_jax_privacy_auditing", path)
    module = importlib.util.module_from_spec(module_spec)
    sys.modules["_jax_privacy_auditing"] = module
    module_spec.loader.exec_module(module)
    return module


def gaussian_canaries(mu: float, m: int, seed: int):
    rng = np.random.default_rng(seed)
    included = rng.random(m) < 0.5
    return rng.normal(size=m) + mu * included, included


def rr_canaries(epsilon: float, m: int, seed: int):
    rng = np.random.default_rng(seed)
    included = rng.random(m) < 0.5
    keep = rng.random(m) < 1.0 / (1.0 + np.exp(-epsilon))
    return np.where(keep, included, ~included).astype(float), included


def rr_rows(ja, seeds: int) -> None:
    print(f"\nrandomised response canaries: mean bound / seeds above the true epsilon (of {seeds})")
    head = (f"{'eps':>4} {'m':>6} {'true':>6} | {'ours fdp':>14} {'fdp(e,d)':>14} {'steinke':>14} | "
            f"{'jax fdp':>14} {'jax stk':>14}")
    print(head)
    print("-" * len(head))
    for m in (1000, 10000):
        for epsilon in (1.0, 2.0, 4.0):
            p = 1.0 / (1.0 + np.exp(-epsilon))
            truth = float(np.log((p - DELTA) / (1.0 - p)))
            cols = {k: [] for k in ("fdp", "fdp_ed", "steinke", "jax_fdp", "jax_steinke")}
            for seed in range(seeds):
                scores, included = rr_canaries(epsilon, m, seed)
                b = audit_one_run(scores, included, delta=DELTA)
                cols["fdp"].append(b.epsilon_lcb_fdp)
                cols["fdp_ed"].append(b.epsilon_lcb_fdp_eps_delta)
                cols["steinke"].append(b.epsilon_lcb_steinke)
                if ja is not None:
                    auditor = ja.CanaryScoreAuditor(scores[included], scores[~included])
                    cols["jax_fdp"].append(auditor.epsilon_one_run_fdp(0.05, DELTA))
                    cols["jax_steinke"].append(auditor.epsilon_one_run(0.05, DELTA))
            cells = " | ".join(" ".join(f"{np.mean(cols[k]) if cols[k] else float('nan'):>7.3f} "
                                        f"{sum(v > truth for v in cols[k]):>3}/{seeds:<2}" for k in group)
                               for group in (("fdp", "fdp_ed", "steinke"), ("jax_fdp", "jax_steinke")))
            print(f"{epsilon:>4g} {m:>6} {truth:>6.3f} | {cells}")


def row(ja, epsilon: float, m: int, seeds: int) -> dict:
    mu = fdp.gdp_mu(epsilon, DELTA)
    ours = {"fdp": [], "fdp_ed": [], "steinke": []}
    theirs = {"fdp": [], "steinke": []}
    t_ours, t_jax = [], []
    for seed in range(seeds):
        scores, included = gaussian_canaries(mu, m, seed)
        began = time.perf_counter()
        b = audit_one_run(scores, included, delta=DELTA)
        t_ours.append(time.perf_counter() - began)
        ours["fdp"].append(b.epsilon_lcb_fdp)
        ours["fdp_ed"].append(b.epsilon_lcb_fdp_eps_delta)
        ours["steinke"].append(b.epsilon_lcb_steinke)
        if ja is not None:
            began = time.perf_counter()
            auditor = ja.CanaryScoreAuditor(scores[included], scores[~included])
            theirs["fdp"].append(auditor.epsilon_one_run_fdp(0.05, DELTA))
            theirs["steinke"].append(auditor.epsilon_one_run(0.05, DELTA))
            t_jax.append(time.perf_counter() - began)
    return {"eps": epsilon, "m": m, "mu": mu, "ours": {k: np.mean(v) for k, v in ours.items()},
            "ours_min": {k: np.min(v) for k, v in ours.items()},
            "theirs": {k: np.mean(v) for k, v in theirs.items()},
            "wins": sum(o >= t for o, t in zip(ours["fdp"], theirs["fdp"])),
            "t_ours": np.mean(t_ours), "t_jax": np.mean(t_jax) if t_jax else float("nan")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()
    ja = load_jax_auditing()
    print(f"one-run bounds on Gaussian-mechanism canaries, delta={DELTA:g}, confidence 0.95, mean of {args.seeds} "
          f"seeds; jax_privacy: {'loaded' if ja else 'NOT installed'}")
    head = (f"{'true eps':>8} {'m':>6} {'mu':>6} | {'ours fdp':>8} {'fdp(e,d)':>8} {'steinke':>8} | "
            f"{'jax fdp':>8} {'jax stk':>8} | {'fdp/jax':>7} {'stk/jax':>7} {'seeds ours>=jax':>15} | "
            f"{'fdp/eps':>7} {'fdp(e,d)/eps':>12} {'stk/eps':>7} | {'ours s':>7} {'jax s':>7}")
    print(head)
    print("-" * len(head))
    for m in (1000, 10000):
        for epsilon in (1.0, 4.0, 8.0):
            r = row(ja, epsilon, m, args.seeds)
            o, t = r["ours"], r["theirs"]
            ratio_f = o["fdp"] / t["fdp"] if t.get("fdp") else float("nan")
            ratio_s = o["steinke"] / t["steinke"] if t.get("steinke") else float("nan")
            print(f"{epsilon:>8g} {m:>6} {r['mu']:>6.3f} | {o['fdp']:>8.3f} {o['fdp_ed']:>8.3f} {o['steinke']:>8.3f} | "
                  f"{t.get('fdp', float('nan')):>8.3f} {t.get('steinke', float('nan')):>8.3f} | {ratio_f:>7.2f} "
                  f"{ratio_s:>7.2f} {r['wins']:>11}/{args.seeds:<3} | {o['fdp'] / epsilon:>7.3f} "
                  f"{o['fdp_ed'] / epsilon:>12.3f} {o['steinke'] / epsilon:>7.3f} | {r['t_ours']:>7.2f} "
                  f"{r['t_jax']:>7.2f}")
    rr_rows(ja, args.seeds)


if __name__ == "__main__":
    main()
