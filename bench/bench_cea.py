"""Benchmark of the canary extraction attack (canary-extraction-nlu §3.1); prints one table from one run.

    python bench/bench_cea.py [--device cpu|cuda] [--n-train 1000] [--epochs 15] [--trials 10]

Target: the built-in joint BiLSTM-CRF (§4.1), undefended, trained on the
synthetic Snips-like corpus with the pin canary repeated 100 times (cached
under --cache-dir, so later runs skip training). Rows:

* batched CEA (all trials in one optimisation) vs a loop of one-trial calls
  with the same seeds: time ratio, and whether the reconstructions are identical;
* CEA time over a bare loop of the same forward+backward passes (same batch,
  same 250 steps, no softmax/mixing/Adam): the attack's own overhead (goal <= 1.25);
  CEA and bare runs alternate ``--repeats`` times and the median of the
  per-pair ratios is printed, so load from other processes on a shared
  machine hits both sides of each ratio alike;
* exhaustive scoring of all 10^4 pins next to the gradient attack;
* the default attack (``method="auto"``: exhaustive here, since 10^4 fits the
  budget), auto forced over its budget (``budget=1000``: gradient then scoring
  of the ``ranked`` most probable secrets per start), exhaustive, and the
  paper's gradient attack (one start, and best of ``--starts``) side by side:
  time, accuracy, rank of the true pin (exact or lower bound), and ratios to
  the default. ``--compare-only`` prints just this table.
"""
from __future__ import annotations

import argparse
import time

import torch

from pytest_privleak.attacks.cea.attack import extract
from pytest_privleak.cache.targets import TargetCache
from pytest_privleak.canaries import canary, inject_canaries
from pytest_privleak.data import generate_snips_like
from pytest_privleak.targets import train_target


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def timed(device: str, fn):
    _sync(device)
    began = time.perf_counter()
    out = fn()
    _sync(device)
    return time.perf_counter() - began, out


def bare_loop(model, rows: int, length: int, epochs: int, device: str) -> float:
    """The attack's forward+backward passes alone: loss on a leaf input, gradient w.r.t. it, 250 times."""
    pin_tags = [canary("pin").tags] * rows
    intents = [canary("pin").intent] * rows
    dim = model.input_embeddings().shape[1]
    x = torch.randn(rows, length, dim, device=model.input_embeddings().device, generator=None).requires_grad_(True)

    def run():
        for _ in range(epochs):
            loss = model.loss_from_embeddings(x, intents, pin_tags).sum()
            torch.autograd.grad(loss, [x])
    return timed(device, run)[0]


def overhead(device: str, repeats: int, attack, bare) -> tuple[float, float]:
    """Median bare time and median CEA/bare ratio over ``repeats`` alternating (attack, bare) pairs."""
    pairs = []
    for _ in range(repeats):
        t_attack = attack()
        pairs.append((bare(), t_attack))
    bares = sorted(b for b, _ in pairs)
    ratios = sorted(a / b for b, a in pairs)
    return bares[len(bares) // 2], ratios[len(ratios) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--n-train", type=int, default=1000)
    parser.add_argument("--epochs", type=int, default=15, help="target training epochs")
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--starts", type=int, default=8, help="restarts for the best-of-K row")
    parser.add_argument("--cache-dir", default=".privleak-bench-cache")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--repeats", type=int, default=3, help="alternating CEA/bare pairs per overhead ratio")
    parser.add_argument("--repeats-canary", type=int, default=100, help="copies of the pin in the training data")
    parser.add_argument("--compare-only", action="store_true", help="only the auto/exhaustive/gradient table")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = args.device

    pin = canary("pin", seed=0)
    data = inject_canaries(generate_snips_like(args.n_train, 200, 200, seed=0), pin, repeats=args.repeats_canary)
    t_train, model = timed(device, lambda: train_target("joint-bilstm-crf", data, device=device, seed=0,
                                                        cache=TargetCache(args.cache_dir), epochs=args.epochs))
    length = len(pin.tokens)
    kw = dict(method="gradient", starts=1, select="single", seed=0)
    extract(model, pin, trials=1, epochs=5, **kw)                     # warm-up (kernels, allocator)
    header = (f"# CEA bench: {device}, torch {torch.__version__}, threads {torch.get_num_threads()}; target "
              f"joint-bilstm-crf {model.content_hash[:12]} (n_train={args.n_train}, epochs={args.epochs}, "
              f"pin x{args.repeats_canary}, train/load {t_train:.1f}s); canary {pin.text!r}")
    if args.compare_only:
        print(header)
        compare_attacks(model, pin, args.trials, args.starts, device)
        return

    t_batched, batched = timed(device, lambda: extract(model, pin, trials=args.trials, **kw))
    t_loop, looped = timed(device, lambda: [extract(model, pin, trials=1, first_trial=t, **kw)
                                            for t in range(args.trials)])
    identical = batched.reconstructed == tuple(r.reconstructed[0] for r in looped)
    t_bare, ratio = overhead(device, args.repeats,
                             lambda: timed(device, lambda: extract(model, pin, trials=args.trials, **kw))[0],
                             lambda: bare_loop(model, args.trials, length, 250, device))
    t_best, best = timed(device, lambda: extract(model, pin, method="gradient", trials=args.trials,
                                                 starts=args.starts, seed=0))
    t_bare_best, ratio_best = overhead(
        device, args.repeats, lambda: timed(device, lambda: extract(model, pin, method="gradient",
                                                                  trials=args.trials, starts=args.starts,
                                                                  seed=0))[0],
        lambda: bare_loop(model, args.trials * args.starts, length, 250, device))
    t_exh, exh = timed(device, lambda: extract(model, pin, method="exhaustive"))

    print(header)
    rows = [
        ("batched CEA, %d trials x 1 start" % args.trials, t_batched,
         f"acc {batched.accuracy:.2f}, HDT {batched.hdt:.3f}"),
        ("loop of %d one-trial calls" % args.trials, t_loop,
         f"loop/batched = {t_loop / t_batched:.2f}x; reconstructions identical: {identical}"),
        ("bare fwd+bwd loop, batch %d, 250 steps" % args.trials, t_bare,
         f"CEA/bare = {ratio:.2f}, median of {args.repeats} alternating pairs (goal <= 1.25)"),
        ("batched CEA, %d trials x %d starts (best_loss)" % (args.trials, args.starts), t_best,
         f"acc {best.accuracy:.2f}, HDT {best.hdt:.3f}"),
        ("bare fwd+bwd loop, batch %d, 250 steps" % (args.trials * args.starts), t_bare_best,
         f"CEA/bare = {ratio_best:.2f}, median of {args.repeats} alternating pairs (goal <= 1.25)"),
        ("exhaustive, all 10^4 pins", t_exh,
         f"rank of truth {exh.ranks[0]}; guess {' '.join(exh.reconstructed[0])}; "
         f"exhaustive/gradient(1 trial) = {t_exh / (t_batched / args.trials):.2f}"),
    ]
    print(f"| {'measurement':<44} | {'seconds':>8} | result")
    print(f"|{'-' * 46}|{'-' * 10}|{'-' * 60}")
    for name, seconds, note in rows:
        print(f"| {name:<44} | {seconds:8.2f} | {note}")
    print()
    compare_attacks(model, pin, args.trials, args.starts, device)


def compare_attacks(model, pin, trials: int, starts: int, device: str) -> None:
    """Default (auto) vs exhaustive vs the paper's gradient attack, one table, ratios to the default."""
    runs = [
        ("auto (default)", dict(trials=trials)),
        ("auto over budget (budget=1000, ranked=256)", dict(trials=trials, starts=starts, budget=1000)),
        ("exhaustive", dict(method="exhaustive")),
        ("gradient, paper (1 start, select=single)", dict(method="gradient", trials=trials, starts=1,
                                                          select="single")),
        (f"gradient, best of {starts} starts", dict(method="gradient", trials=trials, starts=starts)),
    ]
    measured = []
    for name, kwargs in runs:
        seconds, report = timed(device, lambda: extract(model, pin, seed=0, **kwargs))
        measured.append((name, seconds, report))
    base_seconds, base = measured[0][1], measured[0][2]
    print(f"| {'attack':<44} | {'seconds':>8} | {'time/auto':>9} | {'acc':>5} | {'acc/auto':>8} | {'HDT':>5} | "
          "rank of true pin (attack that ran)")
    print(f"|{'-' * 46}|{'-' * 10}|{'-' * 11}|{'-' * 7}|{'-' * 10}|{'-' * 7}|{'-' * 40}")
    for name, seconds, report in measured:
        rank = report.ranks[0]
        shown = f"{rank}" if report.ranks_exact[0] else f">= {rank} (bound, {report.scored[0]} scored)"
        ratio = f"{report.accuracy / base.accuracy:.2f}" if base.accuracy else "n/a"
        print(f"| {name:<44} | {seconds:8.2f} | {seconds / base_seconds:9.2f} | {report.accuracy:5.2f} | "
              f"{ratio:>8} | {report.hdt:5.3f} | {shown} ({report.attacks[0]}, {report.n_trials} trial(s))")


if __name__ == "__main__":
    main()
