"""Benchmark of generation: our generator (adapters/generation.py) over a bare ``model.generate``; one run.

    python bench/bench_generation.py [--device cpu|cuda] [--hidden 128] [--layers 2] [--batch 64]
                                     [--tokens 32] [--repeats 5]

The model is a GPT-2 built from a config (no download, untrained: timing only)
over a word-level tokenizer written in memory. Rows (goal: ratio <= 1.2):

* greedy: ``generate(..., method="greedy")`` from ``--batch`` prefixes vs
  ``model.generate(do_sample=False)`` on the same pre-built, left-padded ids;
* sampling (top-k 40): ``method="sampling"`` vs ``model.generate(do_sample=True, top_k=40)``.

Both sides generate exactly ``--tokens`` new tokens (no end-of-sequence token
stops either side), with the key/value cache; the greedy tokens of both sides
are checked equal before timing. Ours and the bare run alternate ``--repeats`` times and the median
of the per-pair ratios is printed, so load from other processes hits both sides alike.
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import timed  # noqa: E402
from helpers_generation import word_tokenizer  # noqa: E402

from pytest_privleak.adapters.generation import generate, generator_for  # noqa: E402

WORDS = ["my", "pin", "code", "is", "call", "play", "a", "song", "by", "the", "book", "table", *"0123456789"]
PREFIXES = ["my pin code is", "play a song by", "call", "book a table"]


def build(hidden: int, layers: int, device: str):
    from transformers import GPT2Config, GPT2LMHeadModel

    tok = word_tokenizer(WORDS)
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=len(tok), n_positions=256, n_embd=hidden, n_layer=layers, n_head=2,
                        bos_token_id=0, eos_token_id=0)
    return GPT2LMHeadModel(config).to(device).eval(), tok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model, tok = build(args.hidden, args.layers, args.device)
    gen = generator_for(model, tok)
    gen.eos_id = None   # no end-of-sequence stop on our side either
    prefixes = [gen.encode_prefix(PREFIXES[i % len(PREFIXES)].split()) for i in range(args.batch)]
    width = max(len(p) for p in prefixes)
    ids = torch.tensor([[tok.pad_token_id] * (width - len(p)) + p for p in prefixes], device=args.device)
    mask = (ids != tok.pad_token_id).long()
    bare_options = dict(attention_mask=mask, max_new_tokens=args.tokens, min_new_tokens=args.tokens,
                        pad_token_id=tok.pad_token_id, eos_token_id=None)
    rows = {
        "greedy": (lambda: generate(gen, prefixes, method="greedy", budget=1, max_tokens=args.tokens),
                   lambda: model.generate(ids, do_sample=False, **bare_options)),
        "sampling top-k 40": (lambda: generate(gen, prefixes, method="sampling", budget=1, max_tokens=args.tokens,
                                               top_k=40, seed=0),
                              lambda: model.generate(ids, do_sample=True, top_k=40, **bare_options)),
    }
    print(f"generation, GPT-2 hidden {args.hidden} x {args.layers} layers, {args.batch} prefixes x {args.tokens} "
          f"new tokens, {args.device}, {args.threads} thread(s), median of {args.repeats} paired runs")
    print(f"{'row':<20} {'ours s':>9} {'bare s':>9} {'ratio':>7}  goal <= 1.2")
    with torch.no_grad():
        ours_greedy = generate(gen, prefixes, method="greedy", budget=1, max_tokens=args.tokens)
        bare_greedy = model.generate(ids, do_sample=False, **bare_options)[:, width:].tolist()
        if [rows_[0] for rows_ in ours_greedy] != bare_greedy:
            raise SystemExit("our greedy tokens differ from model.generate's: the timing would compare different work")
        for name, (ours, bare) in rows.items():
            ours(), bare()   # warm-up
            pairs = [(timed(args.device, ours), timed(args.device, bare)) for _ in range(args.repeats)]
            ratio = statistics.median(o / b for o, b in pairs)
            print(f"{name:<20} {statistics.median(o for o, _ in pairs):>9.4f} "
                  f"{statistics.median(b for _, b in pairs):>9.4f} {ratio:>7.2f}")


if __name__ == "__main__":
    main()
