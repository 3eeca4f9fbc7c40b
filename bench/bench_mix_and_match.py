"""Benchmark: Mix And Match vs exhaustive search, time and candidates scored, in one run (§5.1.4, §5.2).

    python bench/bench_mix_and_match.py [--device cpu|cuda] [--base tiny-bert|minilm|DIR] [--repeats 10]

Fine-tunes (or loads from ``.privleak-cache``) a ``transformer-classifier``
on the Snips-like intents with five canaries "i bought new <thing> ." that
carry contradicting labels (§5.3). For each canary: the exhaustive search
scores every filtered vocabulary token with the classifier's cross-entropy;
Mix And Match scores only the candidates its masked LM needs to reach the
true token (the Frankenstein model of §4.3.1, or the pretrained LM), and the
table prints the rank each reaches, the candidates each scored and the
wall-clock time, with the ratios side by side.
"""
from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_privleak.attacks.mix_and_match import as_attack_model, mix_and_match  # noqa: E402
from pytest_privleak.attacks.mix_and_match_canaries import contradicting_canaries, inject_mask_canaries  # noqa: E402
from pytest_privleak.cache import TargetCache  # noqa: E402
from pytest_privleak.data.synthetic import generate_snips_like  # noqa: E402
from pytest_privleak.targets import train_target  # noqa: E402

THINGS = ("towels", "lamp", "piano", "wallet", "camera")
INTENTS = ("AddToPlaylist", "BookRestaurant", "GetWeather", "PlayMusic", "RateBook")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--base", default="tiny-bert")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--cache-dir", default=".privleak-cache")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    canaries = contradicting_canaries("i bought new {} .", THINGS, INTENTS)
    data = generate_snips_like(n_train=800, n_valid=100, n_test=100)
    model = train_target("transformer-classifier", inject_mask_canaries(data, canaries, repeats=args.repeats),
                         device=args.device, cache=TargetCache(args.cache_dir), base=args.base, early_stopping=False)
    as_attack_model(model)  # build the Frankenstein model once, outside the timings
    print(f"device {args.device}, base {args.base}, {args.repeats} repeats, torch threads {args.threads}")
    header = (f"{'canary':<26}{'|V|':>6}{'exh rank':>9}{'exh s':>8}"
              + "".join(f"{g + ' need':>13}{'rank':>6}{'s':>7}{'fewer':>7}{'faster':>7}" for g in ("frank", "base")))
    print(header)
    ratios: dict[str, list[float]] = {"frankenstein": [], "base": []}
    for canary in canaries:
        exhaustive = mix_and_match(model, canary, method="exhaustive").rankings[0]
        row = f"{canary.target + ' [' + canary.intent + ']':<26}{exhaustive.vocabulary:>6}{exhaustive.rank:>9g}" \
              f"{exhaustive.seconds:>8.3f}"
        for generator in ("frankenstein", "base"):
            probe = mix_and_match(model, canary, method="exhaustive", generator=generator).rankings[0]
            budget = math.ceil(probe.candidates_needed)
            mm = mix_and_match(model, canary, method="mix-and-match", budget=budget, generator=generator).rankings[0]
            fewer = exhaustive.scored / mm.scored
            ratios[generator].append(fewer)
            row += f"{mm.scored:>13}{mm.rank:>6g}{mm.seconds:>7.3f}{fewer:>7.1f}{exhaustive.seconds / mm.seconds:>7.1f}"
        print(row)
    for generator, values in ratios.items():
        print(f"{generator}: candidates scored, exhaustive / Mix And Match: median {statistics.median(values):.1f}x, "
              f"max {max(values):.1f}x (paper §5.2: up to 50x with the Frankenstein model on BERT-base)")


if __name__ == "__main__":
    main()
