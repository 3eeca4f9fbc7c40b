"""Exact exposure of a 4-digit pin on the causal target: the shared prefix once vs a forward per secret.

    python bench/bench_causal_exposure.py [--train 800] [--repeats 3] [--threads 1] [--cache DIR]

Trains (or loads from ``--cache``) ``train_target("causal-lm", ...)`` on a
Snips-like set with one pin said 10 times, then times
``compute_exposure(method="exact")`` over the 10^4 candidates three ways:

* shared prefix: the target as it is (``score_with_shared_prefix``): the
  prefix ``<s> my pin code is`` through the model once per batch of 4096
  candidates, its key/value cache expanded over the distinct first three
  digits of the batch (the fourth digit is read off their outputs, never fed);
* full rows, batched: the same model seen only through ``score(utterances)``
  (every candidate's whole sentence, tokenised, 64 per forward pass; what
  exposure ran before issue 20);
* one forward per secret: the adapter called once per candidate sentence
  (all 10^4), the cost of a scorer that does not batch; timed once.

Runs alternate ``--repeats`` times and the medians are printed with their
ratios (goal: shared prefix >= 3x faster than one forward per secret on CPU).
The figure (exposure bits and rank) of each way is printed too: they must agree.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from pytest_privleak.attacks.exposure.attack import compute_exposure  # noqa: E402
from pytest_privleak.canaries import canary, inject_canaries  # noqa: E402
from pytest_privleak.data.synthetic import generate_snips_like  # noqa: E402
from pytest_privleak.targets import train_target  # noqa: E402


class FullRows:
    """The causal target seen only as a SequenceScorer: whole sentences, batched by the adapter."""

    def __init__(self, target) -> None:
        self.target = target

    def score(self, utterances):
        return self.target.adapter().score(utterances)


class OnePerSecret:
    """The causal target called once per candidate sentence (batch of one)."""

    def __init__(self, target) -> None:
        self.adapter = target.adapter()

    def score(self, utterances):
        return np.concatenate([self.adapter.score([u]) for u in utterances])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--train", type=int, default=800)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--cache", default=None, help="a TargetCache folder (default: train without a cache)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    pin = canary("pin", 4, seed=0)
    data = inject_canaries(generate_snips_like(n_train=args.train, n_valid=args.train // 10, n_test=0, seed=0),
                           pin, repeats=10)
    cache = None
    if args.cache:
        from pytest_privleak.cache.targets import TargetCache

        cache = TargetCache(args.cache)
    began = time.perf_counter()
    target = train_target("causal-lm", data, cache=cache, progress=False)
    print(f"causal-lm target ({'loaded' if target.loaded_from_cache else 'trained'} in "
          f"{time.perf_counter() - began:.1f} s), {args.train} utterances + pin said 10 times, "
          f"torch threads {args.threads}")
    ways = {"shared prefix (KV cache, batched)": target, "full rows, batched (64 a pass)": FullRows(target),
            "one forward per secret": OnePerSecret(target)}
    times: dict[str, list[float]] = {name: [] for name in ways}
    figures = {}
    for repeat in range(args.repeats):
        for name, scorer in ways.items():
            if name.startswith("one forward") and repeat:
                continue                            # the slowest way once: it alone takes minutes
            start = time.perf_counter()
            figures[name] = compute_exposure(scorer, pin, method="exact")
            times[name].append(time.perf_counter() - start)
    shared = statistics.median(times["shared prefix (KV cache, batched)"])
    print(f"{'way':<36} {'median s':>9} {'runs':>5} {'x shared':>9} {'exposure':>9} {'rank':>5}")
    for name, runs in times.items():
        m = statistics.median(runs)
        print(f"{name:<36} {m:>9.3f} {len(runs):>5} {m / shared:>9.2f} {figures[name].value:>9.3f} "
              f"{figures[name].rank:>5}")
    single = statistics.median(times["one forward per secret"])
    print(f"speed-up of the shared prefix over one forward per secret: {single / shared:.1f}x (goal >= 3x); "
          f"over full rows batched: {statistics.median(times['full rows, batched (64 a pass)']) / shared:.1f}x")


if __name__ == "__main__":
    main()
