"""Benchmark: Mix And Match vs exhaustive search, time and candidates scored, in one run (§5.1.4, §5.2).

    python bench/bench_mix_and_match.py [--device cpu|cuda] [--base tiny-bert|minilm|DIR] [--repeats 10]
                                        [--lr 1e-3] [--refit 2000]

Fine-tunes (or loads from ``.privleak-cache``) a ``transformer-classifier``
on the Snips-like intents with five canaries "i bought new <thing> ." that
carry contradicting labels (§5.3). For each canary: the exhaustive search
scores every filtered vocabulary token with the classifier's cross-entropy;
Mix And Match scores only the candidates its masked LM needs to reach the
true token (the Frankenstein model of §4.3.1, the same with its head re-fit
on ``--refit`` public sentences, encoder frozen (§4.3.1's option), or the
pretrained LM), and the table prints the rank each reaches, the candidates
each scored and the wall-clock time, with the ratios side by side. A canary
never injected ("umbrella") is ranked too: the candidates a generator needs
for it say how much of its saving comes from the public language, not from
memorisation. ``--lr`` sets the fine-tuning rate (the paper's is 1e-6).
"""
from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_privleak.attacks.mix_and_match.attack import as_attack_model, mix_and_match, mix_and_match_model  # noqa: E402
from pytest_privleak.attacks.mix_and_match.canaries import (contradicting_canaries, inject_mask_canaries,  # noqa: E402
                                                            mask_canary)
from pytest_privleak.cache.targets import TargetCache  # noqa: E402
from pytest_privleak.data.public_corpus import generate_public_corpus  # noqa: E402
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
    parser.add_argument("--lr", type=float, default=None, help="fine-tuning rate (default: the target's own)")
    parser.add_argument("--refit", type=int, default=2000, help="public sentences the re-fit head learns on")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    canaries = contradicting_canaries("i bought new {} .", THINGS, INTENTS)
    never = mask_canary("i bought new umbrella .", INTENTS[0])
    data = generate_snips_like(n_train=800, n_valid=100, n_test=100)
    model = train_target("transformer-classifier", inject_mask_canaries(data, canaries, repeats=args.repeats),
                         device=args.device, cache=TargetCache(args.cache_dir), base=args.base, early_stopping=False,
                         **({} if args.lr is None else {"lr": args.lr}))
    # the Frankenstein models are built once, outside the timings
    views = {"frank": (as_attack_model(model), "frankenstein"), "base": (as_attack_model(model), "base"),
             "refit": (mix_and_match_model(model.classifier, model.generator, model.tokenizer,
                                           refit_on=generate_public_corpus(args.refit, seed=1)), "frankenstein")}
    print(f"device {args.device}, base {args.base}, lr {model.config.lr:g} (final train loss "
          f"{model.history['epochs'][-1]['train_loss']:.3f}), {args.repeats} repeats, torch threads {args.threads}; "
          f"refit: head re-fit on {args.refit} public sentences (losses "
          f"{', '.join(f'{x:.2f}' for x in views['refit'][0].refit_losses)})")
    header = (f"{'canary':<26}{'|V|':>6}{'exh rank':>9}{'exh s':>8}"
              + "".join(f"{g + ' need':>12}{'rank':>6}{'s':>7}{'fewer':>7}{'faster':>7}" for g in views))
    print(header)
    ratios: dict[str, list[float]] = {g: [] for g in views}
    for canary in (*canaries, never):
        exhaustive = mix_and_match(model, canary, method="exhaustive").rankings[0]
        label = canary.target + " [" + canary.intent + "]" + (" never" if canary is never else "")
        row = f"{label:<26}{exhaustive.vocabulary:>6}{exhaustive.rank:>9g}{exhaustive.seconds:>8.3f}"
        for name, (view, generator) in views.items():
            probe = mix_and_match(view, canary, method="exhaustive", generator=generator).rankings[0]
            budget = math.ceil(probe.candidates_needed)
            mm = mix_and_match(view, canary, method="mix-and-match", budget=budget, generator=generator).rankings[0]
            fewer = exhaustive.scored / mm.scored
            if canary is not never:
                ratios[name].append(fewer)
            row += f"{mm.scored:>12}{mm.rank:>6g}{mm.seconds:>7.3f}{fewer:>7.1f}{exhaustive.seconds / mm.seconds:>7.1f}"
        print(row)
    for name, values in ratios.items():
        print(f"{name}: candidates scored, exhaustive / Mix And Match over the injected canaries: median "
              f"{statistics.median(values):.1f}x, max {max(values):.1f}x (paper §5.2: up to 50x with the "
              "Frankenstein model on BERT-base)")


if __name__ == "__main__":
    main()
