"""What the baseline gate sees where teams run it (issues 26 and 37): false alarms on seed-only changes and
detection of a canary set said 2x and 4x as often, by the gate's own seed rule.

    python bench/bench_seeds.py [--targets joint,lm,causal] [--repeats 2,4,8] [--pool 14] [--k 7]
                                [--pool-base 20] [--epochs joint=1,lm=1,causal=1] [--count 8] [--paired]
                                [--cache-dir DIR]

For each built-in target it trains a pool of models (training seeds 0, 1, ...:
``--pool-base`` at the baseline's repeat count, ``--pool`` at each other) per repeat count R on the default ``nlu_dataset`` (the
bundled corpus, 1500 training utterances) with a canary set of ``--count``
pins (``canary("pin", count=8)``, the fixture's default) each said R times,
and measures the set's exposure on every model through ``measure_exposure``
(one scoring of the pin space per model; each pin ranked among the secrets
that are not in the set). Trained models go to the target cache and figures
to the result cache under ``--cache-dir``, and every per-model table of
per-canary exposures to ``figures.json`` there, so a second run (or another
analysis) trains nothing.

Then it builds baseline/run pairs of ``k``-seed reports and asks the gate
(:func:`pytest_privleak.report.gate.compare`, the rule of
:mod:`pytest_privleak.report.seed_rule` and the default tolerance of a set's
mean exposure) for its verdict:

* false alarm: baseline and run both at the lowest R, disjoint seeds (only
  the training seed changed);
* detection of each higher R: baseline at the lowest R, run at the higher R,
  disjoint seeds;
* the 4-of-7 cases: the run's seeds are 4 of the highest R and 3 of the
  lowest, or 4 whose every canary sits at the ceiling (rank 1; the issue's
  case) and 3 of the lowest R (a shift of SOME seeds).

With ``--paired`` it also compares the SAME seeds on both sides (main and the branch both train seeds
0..k-1, the usual merge request; the gate then pairs them by seed): false alarms against one more pool in
which only the positions of the canaries' copies in the corpus changed, and detection of each higher R.

Each rate is over ``--pairs`` random pairs of disjoint seed sets; pairs from
one pool share models, so the interval is a 95 % percentile bootstrap over
the pool's models (each replicate resamples the models of each pool with
replacement, then redraws the pairs), and the line says how many pairs and
how many models the rate rests on.
"""
from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from pytest_privleak.assertions import measure_exposure
from pytest_privleak.cache import results as result_cache
from pytest_privleak.cache.targets import TargetCache
from pytest_privleak.canaries import canary, inject_canaries
from pytest_privleak.data.synthetic import generate_snips_like
from pytest_privleak.report.gate import DEFAULT_TOLERANCES, SEED_ALPHA, compare
from pytest_privleak.targets.seeds import train_target_seeds

TARGETS = {"joint": "joint-bilstm-crf", "lm": "lstm-lm", "causal": "causal-lm"}


def pool(kind: str, repeats: int, args, cache: TargetCache, epochs: int | None, size: int,
         positions: int = 0) -> dict:
    """The per-canary exposure table of ``size`` models at ``repeats``, with seconds spent; ``positions``
    seeds where the copies land in the corpus (another value: a change that does not matter)."""
    pins = canary("pin", seed=0, count=args.count)
    data = inject_canaries(generate_snips_like(seed=0), pins, repeats=repeats, seed=positions)
    config = {} if epochs is None else {"epochs": epochs}
    began = time.perf_counter()
    models = train_target_seeds(TARGETS[kind], data, seeds=size, seed=0, cache=cache, **config)
    trained = time.perf_counter()
    result = measure_exposure(models, pins) if args.count > 1 else None
    table = [list(row) for row in result.per_canary] if result is not None else \
        [[measure_exposure(m, pins).value] for m in models]
    return {"table": table, "ceiling": result.ceiling if result is not None else None,
            "fingerprint": pins.fingerprint() if args.count > 1 else "one", "metric": result.metric if result else
            "exposure_bits", "train_s": trained - began, "attack_s": time.perf_counter() - trained}


def report(rows: list[list[float]], fingerprint: str, ceiling: float | None, metric: str, seeds: list) -> dict:
    """A one-result report as the gate reads it (per-seed means, the per-canary table, the canary set, the
    training seeds: the same on both sides makes the gate compare them in pairs)."""
    means = [float(np.mean(r)) for r in rows]
    result = {"key": f"t.py::t::exposure.{metric}[pins]", "attack": "exposure", "metric": metric,
              "value": float(np.mean(means)), "direction": "at_most", "label": "pins", "per_seed": means,
              "ceiling": ceiling, "target": {"canary_set": fingerprint, "seeds": list(seeds)}, "extra": {}}
    if len(rows[0]) > 1:
        result["per_canary"] = rows
    return {"tests": [{"nodeid": "t.py::t", "results": [result]}]}


def flagged(base: list[list[float]], run: list[list[float]], meta: dict, base_seeds: list, run_seeds: list) -> bool:
    """The gate's verdict on one pair: a regression?"""
    tol = DEFAULT_TOLERANCES[meta["metric"]]
    old = report(base, meta["fingerprint"], meta["ceiling"], meta["metric"], base_seeds)
    old["tests"][0]["results"][0]["tolerance"] = tol
    new = report(run, meta["fingerprint"], meta["ceiling"], meta["metric"], run_seeds)
    return bool(compare(new, old, {}, "baseline.json")["regressions"])


def pairs(n_base: int, n_run: int, k: int, count: int, rng: random.Random, same: bool, mixed: int = 0,
          paired: bool = False):
    """``count`` pairs of seed index lists (base k, run k); disjoint when both come from one pool (``same``).
    ``mixed`` > 0: the run takes ``mixed`` seeds of the other pool and ``k - mixed`` of the base pool.
    ``paired``: the run trains the SAME seeds as the baseline (the usual merge request)."""
    out = []
    for _ in range(count):
        if paired:
            chosen = rng.sample(range(min(n_base, n_run)), k)
            out.append((chosen, [("run", i) for i in chosen]))
        elif same:
            chosen = rng.sample(range(n_base), 2 * k)
            out.append((chosen[:k], [("base", i) for i in chosen[k:]]))
        elif mixed:
            chosen = rng.sample(range(n_base), 2 * k - mixed)
            out.append((chosen[:k], [("run", i) for i in rng.sample(range(n_run), mixed)]
                        + [("base", i) for i in chosen[k:]]))
        else:
            base = rng.sample(range(n_base), k)
            free = [i for i in range(n_run) if i not in base]
            if len(free) < k:      # a small run pool: take its seeds first, the baseline's among the others
                run = rng.sample(range(n_run), k)
                base = rng.sample([i for i in range(n_base) if i not in run], k)
            else:
                run = rng.sample(free, k)
            out.append((base, [("run", i) for i in run]))
    return out


def rate(base_tab, run_tab, meta, k, count, rng, same=False, mixed=0, paired=False) -> float:
    hits = 0
    for b, r in pairs(len(base_tab), len(run_tab), k, count, rng, same, mixed, paired):
        run_rows = [(base_tab if side == "base" else run_tab)[i] for side, i in r]
        run_seeds = list(b) if paired else [i if side == "base" else 1000 + i for side, i in r]
        hits += flagged([base_tab[i] for i in b], run_rows, meta, list(b), run_seeds)
    return hits / count


def with_interval(base_tab, run_tab, meta, args, seed, same=False, mixed=0,
                  paired=False) -> tuple[float, float, float]:
    rng = random.Random(seed)
    point = rate(base_tab, run_tab, meta, args.k, args.pairs, rng, same, mixed, paired)
    reps = []
    for _ in range(args.reps):
        if paired:   # resample seeds: a seed's two models stay together
            idx = [rng.randrange(min(len(base_tab), len(run_tab))) for _ in range(min(len(base_tab), len(run_tab)))]
            rb, rr = [base_tab[i] for i in idx], [run_tab[i] for i in idx]
        else:
            rb = [base_tab[rng.randrange(len(base_tab))] for _ in base_tab]
            rr = rb if same else [run_tab[rng.randrange(len(run_tab))] for _ in run_tab]
        reps.append(rate(rb, rr, meta, args.k, max(args.pairs // 4, 20), rng, same, mixed, paired))
    lo, hi = np.percentile(reps, [2.5, 97.5]) if reps else (float("nan"), float("nan"))
    return point, float(lo), float(hi)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--targets", default="joint,lm,causal")
    parser.add_argument("--repeats", default="2,4,8", help="repeat counts; the first is the baseline's")
    parser.add_argument("--pool", type=int, default=14, help="training seeds per higher repeat count (>= k)")
    parser.add_argument("--pool-base", type=int, default=20,
                        help="training seeds at the baseline's repeat count (> 2k: seed-only pairs must differ)")
    parser.add_argument("--k", type=int, default=7, help="seeds per side (the plugin's default 7)")
    parser.add_argument("--count", type=int, default=8, help="canaries in the set (the fixture's default 8)")
    parser.add_argument("--epochs", default="", help="e.g. joint=1,lm=1 (default: each target's own)")
    parser.add_argument("--pairs", type=int, default=200, help="random pairs per rate")
    parser.add_argument("--reps", type=int, default=40, help="bootstrap replicates over the models")
    parser.add_argument("--cache-dir", default=None, help="target + result cache (default: a temporary folder)")
    parser.add_argument("--paired", action="store_true",
                        help="also the same seeds on both sides: false alarms when the copies move in the corpus "
                             "(one more pool of --pool models), detection in pairs")
    args = parser.parse_args()
    torch.set_num_threads(1)
    root = Path(args.cache_dir or tempfile.mkdtemp(prefix="privleak-bench-seeds-"))
    cache = TargetCache(root / "targets")
    result_cache.activate(result_cache.ResultCache(root / "results"))
    epochs = {k: int(v) for k, v in (item.split("=") for item in args.epochs.split(",") if item)}
    repeats = [int(r) for r in args.repeats.split(",")]
    if args.pool_base < 2 * args.k or args.pool < args.k:
        raise SystemExit(f"--pool-base {args.pool_base} / --pool {args.pool} too small for k={args.k}: a seed-only "
                         "pair needs 2k distinct seeds, a detection pair k of each pool")
    store = root / "figures.json"
    saved = json.loads(store.read_text()) if store.exists() else {}
    print(f"pool {args.pool_base} seeds at the baseline's R, {args.pool} per other R, k {args.k}, {args.count} canaries, pairs {args.pairs}, bootstrap "
          f"{args.reps}, alpha {SEED_ALPHA}; cache {root}")
    for name in args.targets.split(","):
        pools = {}
        for r in repeats:
            size = args.pool_base if r == repeats[0] else args.pool
            key = f"{name}|epochs={epochs.get(name, 'default')}|R={r}|m={args.count}|pool={size}"
            pools[r] = saved.get(key) or pool(name, r, args, cache, epochs.get(name), size)
            saved[key] = pools[r]
            store.write_text(json.dumps(saved))
        meta = {k: pools[repeats[0]][k] for k in ("fingerprint", "ceiling", "metric")}
        print(f"\n{TARGETS[name]} (epochs {epochs.get(name, 'default')}), {args.count} pins: mean exposure per seed")
        for r in repeats:
            means = [float(np.mean(row)) for row in pools[r]["table"]]
            cells = [v for row in pools[r]["table"] for v in row]
            at_top = sum(v >= (pools[r]["ceiling"] or np.inf) - 1e-9 for v in cells)
            print(f"  R={r}: mean {np.mean(means):.2f} sd(seed means) {np.std(means, ddof=1):.2f}, canaries at the "
                  f"ceiling {at_top}/{len(cells)}; {(pools[r]['train_s'] + pools[r]['attack_s']) / len(means):.1f} s "
                  f"per model (train {pools[r]['train_s'] / len(means):.1f} s, exposure "
                  f"{pools[r]['attack_s'] / len(means):.1f} s, on the shared CPU)")
        base = pools[repeats[0]]["table"]
        fa = with_interval(base, base, meta, args, 1000, same=True)
        print(f"  false alarms, seed only (R={repeats[0]}): {fa[0]:.1%} [{fa[1]:.1%}, {fa[2]:.1%}] over "
              f"{args.pairs} pairs of {len(base)} models")
        for r in repeats[1:]:
            de = with_interval(base, pools[r]["table"], meta, args, 2000 + r)
            print(f"  detects R {repeats[0]} -> {r} ({r // repeats[0]}x): {de[0]:.1%} [{de[1]:.1%}, {de[2]:.1%}] "
                  f"over {args.pairs} pairs of {len(base)} + {len(pools[r]['table'])} models")
        if args.paired:
            key = (f"{name}|epochs={epochs.get(name, 'default')}|R={repeats[0]}|m={args.count}|pool={args.pool}"
                   "|positions=1")
            moved = saved.get(key) or pool(name, repeats[0], args, cache, epochs.get(name), args.pool, positions=1)
            saved[key] = moved
            store.write_text(json.dumps(saved))
            fa = with_interval(base, moved["table"], meta, args, 5000, paired=True)
            print(f"  paired (the same {args.k} seeds on both sides), false alarms when the copies move in the corpus "
                  f"(R={repeats[0]}): {fa[0]:.1%} [{fa[1]:.1%}, {fa[2]:.1%}] over {args.pairs} pairs of "
                  f"{len(moved['table'])} seed pairs")
            for r in repeats[1:]:
                de = with_interval(base, pools[r]["table"], meta, args, 6000 + r, paired=True)
                print(f"  paired, detects R {repeats[0]} -> {r} ({r // repeats[0]}x): {de[0]:.1%} [{de[1]:.1%}, "
                      f"{de[2]:.1%}] over {args.pairs} pairs of {min(len(base), len(pools[r]['table']))} seed pairs")
        top, some = pools[repeats[-1]]["table"], min(4, args.k - 1)
        four = with_interval(base, top, meta, args, 3000, mixed=some)
        print(f"  detects {some} of {args.k} seeds at R={repeats[-1]}: {four[0]:.1%} [{four[1]:.1%}, {four[2]:.1%}] "
              f"over {args.pairs} pairs")
        if meta["ceiling"] is not None:   # the case: some seeds memorise every canary (rank 1)
            stuck = [[meta["ceiling"]] * len(base[0])] * len(base)
            jump = with_interval(base, stuck, meta, args, 4000, mixed=some)
            print(f"  detects {some} of {args.k} seeds jumping to the ceiling (the others at R={repeats[0]}): "
                  f"{jump[0]:.1%} [{jump[1]:.1%}, {jump[2]:.1%}] over {args.pairs} pairs")


if __name__ == "__main__":
    main()
