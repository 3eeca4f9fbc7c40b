"""Exposure of a 6-digit account number (10^6 secrets) through the sample project's own GRU, before and after.

Issue 35 item 4: a new user scored all 10^6 secrets of a 6-digit account
number through an own GRU classifier's ``score()`` at about 1500 secrets/s
(11 minutes per seed per test). The sample project's GRU (``intent_model``,
a BiGRU with intent and tag heads, trained 12 epochs with the account number
said 100 times) is scored three ways, in one run:

* **before**: ``score()`` of sentences built and checked one by one, as the
  attack did until this change (``Utterance`` per candidate, tokens and BIO
  tags checked each time);
* **score()**: the attack now, which checks the pattern's tokens and tags once;
* **shared prefix**: the adapter's ``score_with_shared_prefix``
  (``protocols.SharedPrefixScorer``, through
  ``adapters.recurrent_prefix.prefix_outputs``): the GRU reads the prefix once
  and each distinct run of leading (backward: trailing) digits once.

First the three are timed alternately on the same spread sample of the space
(``--sample``, default 20 000 secrets; rates in secrets/s), then the exact
exposure of the whole space is measured end to end (enumerate, score, rank),
"before" and "shared prefix" (``--no-full-before``: "before" projected from
its rate instead). Prints the time per seed of each, their ratio, both
exposures and the largest difference between the plain and shared-prefix
scores. One torch thread, as the targets score. ``--quick``: a 3-digit
account number, 2 epochs, a small corpus (seconds; the CI-sized check of the
bench itself).

Run: ``python bench/bench_own_exposure.py`` (about 4 minutes on a loaded 2-core machine).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

SAMPLE_PROJECT = Path(__file__).resolve().parents[1] / "sample_project"
sys.path.insert(0, str(SAMPLE_PROJECT))

from intent_model.model import IntentSlotGRU, Labels, SoftInputAdapter  # noqa: E402
from intent_model.train import train  # noqa: E402

from pytest_privleak.attacks.candidates import enumerate_space, secret_index, space_digits  # noqa: E402
from pytest_privleak.attacks.exposure.attack import (DEFAULT_BATCH, compute_exposure, exact_from_scores,  # noqa: E402
                                                     score_secrets, secret_scorer)
from pytest_privleak.canaries import DIGITS, canary, custom_pattern, inject_canaries  # noqa: E402
from pytest_privleak.data import generate_snips_like  # noqa: E402
from pytest_privleak.data.types import Utterance  # noqa: E402
from pytest_privleak.targets.own_model import train_own_model  # noqa: E402


def untrained_gru(dataset) -> IntentSlotGRU:
    return IntentSlotGRU(Labels.from_utterances(dataset.train))


class ScoreOnly:
    """The adapter seen through ``score()`` alone: what the attack reads of an own model without the protocol."""

    def __init__(self, adapter) -> None:
        self.adapter, self.vocabulary = adapter, adapter.vocabulary

    def score(self, utterances):
        return self.adapter.score(utterances)


def before_scorer(adapter, secret):
    """The attack's plain path until this change: a checked ``Utterance`` per candidate, then ``score()``."""
    pattern = secret.pattern

    def scorer(secret_idx) -> np.ndarray:
        utterances = [Utterance(pattern.prefix + tuple(pattern.vocabulary[i] for i in row), pattern.tags,
                                pattern.intent) for row in np.asarray(secret_idx).tolist()]
        return np.asarray(adapter.score(utterances), dtype=np.float64)

    return scorer


def exact_before(adapter, secret, batch_size: int):
    """``compute_exposure(method="exact")`` as it ran before: the whole space through :func:`before_scorer`."""
    pattern = secret.pattern
    space = enumerate_space(len(pattern.vocabulary), pattern.length, budget=None)
    scores = score_secrets(before_scorer(adapter, secret), space, batch_size)
    return exact_from_scores(scores, secret_index(secret.secret_indices, len(pattern.vocabulary)))


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--digits", type=int, default=6, help="length of the account number (default 6: 10^6)")
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--sample", type=int, default=20_000, help="secrets in the sample the three ways score")
    parser.add_argument("--repeats", type=int, default=3, help="alternating timings of the sample")
    parser.add_argument("--no-full-before", action="store_true",
                        help="project 'before' over the whole space from its sample rate instead of running it")
    parser.add_argument("--quick", action="store_true", help="3 digits, 2 epochs, 300 utterances")
    args = parser.parse_args()
    if args.quick:
        args.digits, args.epochs, args.sample, args.repeats = 3, 2, 1000, 1
    torch.set_num_threads(1)
    load = [os.getloadavg()[0]]
    pattern = custom_pattern("account", ("my", "account", "number", "is"), DIGITS, args.digits, "AccountIntent")
    secret = canary(pattern, seed=0)
    corpus = generate_snips_like(n_train=300, n_valid=40, n_test=40, seed=0) if args.quick else generate_snips_like(seed=0)
    data = inject_canaries(corpus, secret, repeats=100)
    train_seconds, adapter = timed(lambda: train_own_model(train, data, build=untrained_gru, wrap=SoftInputAdapter,
                                                           epochs=args.epochs, seed=0))
    size = pattern.space_size
    print(f"sample project GRU, {args.epochs} epochs on {len(data.train)} utterances: trained in {train_seconds:.1f} s; "
          f"canary {secret.text!r}, {size:,} secrets; torch threads 1, batch {DEFAULT_BATCH}")

    sample = space_digits(np.linspace(0, size - 1, min(args.sample, size)).astype(np.int64), len(DIGITS),
                          pattern.length)
    ways = {"before": before_scorer(adapter, secret), "score()": secret_scorer(ScoreOnly(adapter), secret),
            "shared prefix": secret_scorer(adapter, secret)}
    times: dict[str, list[float]] = {name: [] for name in ways}
    scores = {}
    for _ in range(args.repeats):
        for name, scorer in ways.items():
            seconds, scores[name] = timed(lambda: score_secrets(scorer, sample, DEFAULT_BATCH))
            times[name].append(seconds)
    rate = {name: len(sample) / statistics.median(t) for name, t in times.items()}
    difference = float(np.max(np.abs(scores["shared prefix"] - scores["score()"])))
    relative = float(np.max(np.abs(scores["shared prefix"] - scores["score()"]) / np.abs(scores["score()"])))
    assert np.array_equal(scores["before"], scores["score()"]), "the plain path changed its scores"

    fast_seconds, fast = timed(lambda: compute_exposure(adapter, secret, method="exact"))
    if args.no_full_before:
        before_seconds, before = size / rate["before"], None
    else:
        before_seconds, before = timed(lambda: exact_before(adapter, secret, DEFAULT_BATCH))
    load.append(os.getloadavg()[0])

    print(f"\nsample of {len(sample):,} secrets, {args.repeats} alternating timings (median):")
    print(f"{'way':<16}{'secrets/s':>12}{'vs before':>11}")
    for name in ways:
        print(f"{name:<16}{rate[name]:>12,.0f}{rate[name] / rate['before']:>10.2f}x")
    print(f"shared prefix vs score(): largest difference {difference:.3g} "
          f"(relative {relative:.2g}) over scores of {np.min(scores['score()']):.3g}..{np.max(scores['score()']):.3g}")
    print(f"\nexact exposure of the whole space ({size:,} secrets), per seed:")
    kind = "projected from its rate" if before is None else "measured"
    print(f"  before:        {before_seconds:8.1f} s ({kind})"
          + ("" if before is None else f", exposure {before.value:.3f} bits, rank {before.rank}"))
    print(f"  shared prefix: {fast_seconds:8.1f} s (measured), exposure {fast.value:.3f} bits, rank {fast.rank}")
    print(f"  ratio before / shared prefix: {before_seconds / fast_seconds:.1f}x; "
          f"time per seed {before_seconds / 60:.1f} min -> {fast_seconds / 60:.2f} min")
    if before is not None and (before.rank, before.value) != (fast.rank, fast.value):
        print(f"  NOTE: the two exposures differ (rank {before.rank} vs {fast.rank})")
    print(f"load average (1 min) {load[0]:.1f} before, {load[1]:.1f} after; {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
