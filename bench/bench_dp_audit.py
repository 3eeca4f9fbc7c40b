"""Bench (issue 25): the DP-SGD audit on the test pipelines (tests/dp_pipelines.py), one run.

- correct Opacus pipelines claiming ε in {1, 4, 8} (δ = 1e-5): each method's
  ε_lcb, ε_lcb / ε and wall time (one-run white-box with 2000 gradient
  canaries and, since issue 32, a second training with a count few per step,
  the higher of the two after Bonferroni; one-run black-box with 500 input
  canaries, distinguishing
  white-box with ``--runs`` trainings per side);
- each seeded bug at a claimed ε of 2: ε_lcb of the one-run audit, white- and
  black-box.

Usage: ``python bench/bench_dp_audit.py [--runs 20] [--seed 0]`` (CPU, one thread).
"""
from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import dp_pipelines as P  # noqa: E402
from pytest_privleak.dp.audit import measure_dp_training  # noqa: E402
from pytest_privleak.data.synthetic import generate_snips_like  # noqa: E402

DELTA = 1e-5


def _measure(data, eps, bug, *, threat, method, runs, seed, extra=None):
    config = {"epsilon": eps, "delta": DELTA, "bug": bug, **(extra or {})}
    began = time.perf_counter()
    result = measure_dp_training(P.train, data, eps, DELTA, build=P.build, wrap=P.Scorer, method=method,
                                 threat_model=threat, config=config, seed=seed, runs=runs, check_seed=False)
    return result, time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    base = generate_snips_like(n_train=300, n_valid=0, n_test=0)
    print("| claimed ε | method | threat model | ε_lcb | ε_lcb / ε | Steinke ε_lcb | ceiling | wall s |")
    print("|---|---|---|---|---|---|---|---|")
    for eps in (1.0, 4.0, 8.0):
        for method, threat in (("one-run", "white-box"), ("one-run", "black-box"), ("distinguish", "white-box")):
            r, seconds = _measure(base, eps, "none", threat=threat, method=method, runs=args.runs, seed=args.seed)
            steinke = r.extra.get("epsilon_lcb_steinke")
            ceiling = r.extra.get("distinguish_ceiling")
            name = method if method == "one-run" else f"distinguish ({args.runs}+{args.runs} runs)"
            print(f"| {eps:g} | {name} | {threat} | {r.value:.3f} | {r.value / eps:.3f} | "
                  f"{'' if steinke is None else f'{steinke:.3f}'} | {'' if ceiling is None else f'{ceiling:.2f}'} | "
                  f"{seconds:.0f} |", flush=True)
    print()
    print("| seeded bug (claimed ε = 2) | white-box ε_lcb | black-box ε_lcb | caught |")
    print("|---|---|---|---|")
    for bug in P.BUGS[1:]:
        data = P.imbalanced(base) if bug == "weighted-sampler" else base
        extra = {"lr": 0.5} if bug == "clip-off" else {}
        if bug == "weighted-sampler":
            extra["class_weights"] = P.class_weights(data)
        white, _ = _measure(data, 2.0, bug, threat="white-box", method="one-run", runs=2, seed=args.seed, extra=extra)
        black, _ = _measure(data, 2.0, bug, threat="black-box", method="one-run", runs=2, seed=args.seed, extra=extra)
        caught = "yes" if max(white.value, black.value) > 2.0 else "no"
        print(f"| {bug} | {white.value:.3f} | {black.value:.3f} | {caught} |", flush=True)


if __name__ == "__main__":
    main()
