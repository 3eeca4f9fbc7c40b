"""Benchmark of the embedding-leakage code: attack time per 10k embeddings, encoder adapter vs a bare forward pass.

    python bench/bench_embeddings.py [--device cpu|cuda] [--model tiny|minilm] [--texts 2000] [--repeats 5]

Rows:

* ``encode``: the adapter's ``encode(texts)`` (tokenise, sort by length,
  pad, forward, masked mean, checks) vs a bare pass of the same model over
  pre-tokenised, pre-padded id tensors in the same batches plus a plain mean
  (goal: ratio <= 1.2);
* ``year attack``: training the §V year sub-attack (400 sigmoid units,
  3000 steps of batch 128) plus scoring, per 10k embeddings of training set;
* ``keyword svm``/``mlp``/``dann``: the §VI attacks for 5 keywords, seconds
  including encoding.

Adapter and bare runs alternate ``--repeats`` times; the median of the
per-pair ratios is printed, so load from other processes hits both alike.
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import timed  # noqa: E402


def load(model: str, device: str):
    if model == "minilm":
        from pytest_privleak.adapters.encoder import load_minilm

        return load_minilm(device=device)
    from helpers_embeddings import tiny_encoder

    enc = tiny_encoder(hidden=128)
    enc.model.to(device)
    return enc


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--model", default="tiny", choices=["tiny", "minilm"])
    parser.add_argument("--texts", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    if args.device == "cpu":
        torch.set_num_threads(1)
    from pytest_privleak.embeddings.corpora import medical_corpus

    enc = load(args.model, args.device)
    texts = medical_corpus(args.texts, np.random.default_rng(0)).texts
    ids = enc.tokenizer(texts)["input_ids"]
    order = np.argsort([len(r) for r in ids], kind="stable")
    batches = []
    for start in range(0, len(order), enc.batch_size):
        b = enc.tokenizer.pad({"input_ids": [ids[i] for i in order[start:start + enc.batch_size]]},
                              return_tensors="pt")
        batches.append((b["input_ids"].to(args.device), b["attention_mask"].to(args.device)))

    @torch.no_grad()
    def bare():
        for x, m in batches:
            h = enc.model(input_ids=x, attention_mask=m).last_hidden_state
            (h * m.unsqueeze(-1)).sum(1) / m.sum(1, keepdim=True)

    def adapter():
        enc.encode(texts)

    adapter(), bare()
    a_t, b_t, ratios = [], [], []
    for _ in range(args.repeats):
        a, b = timed(args.device, adapter), timed(args.device, bare)
        a_t.append(a), b_t.append(b), ratios.append(a / b)
    print(f"device {args.device}, model {args.model} ({type(enc.model).__name__}, d={enc.dim}), {args.texts} texts")
    print(f"{'row':<16}{'adapter s':>12}{'bare s':>12}{'ratio':>8}{'texts/s':>10}")
    print(f"{'encode':<16}{statistics.median(a_t):>12.3f}{statistics.median(b_t):>12.3f}"
          f"{statistics.median(ratios):>8.2f}{args.texts / statistics.median(a_t):>10.0f}   goal <= 1.2")

    from pytest_privleak.embeddings.inversion import invert_embeddings
    from pytest_privleak.embeddings.keywords import infer_keywords
    from pytest_privleak.embeddings.patterns import CitizenIdPattern

    n, dim = 10000, enc.dim
    pattern = CitizenIdPattern()

    class Lookup:
        """Stand-in embeddings of the encoder's dimension, so the row times the attack, not the encoder."""

        def encode(self, texts):
            return np.random.default_rng(len(texts)).normal(size=(len(texts), dim)).astype(np.float32)

    seconds = timed("cpu", lambda: invert_embeddings(Lookup(), pattern, n_train=n, n_victims=1000, steps=3000,
                                                     sub_attacks=("year",)))
    print(f"{'year attack':<16}{seconds:>12.3f}{'':>12}{'':>8}   s per 10k training embeddings (3000 steps, batch 128)")
    victims = medical_corpus(1000, np.random.default_rng(1)).texts
    shadow = medical_corpus(500, np.random.default_rng(2)).texts
    for model, kwargs in (("svm", dict(shadow=shadow[:400])), ("mlp", dict(shadow=shadow)),):
        s = timed("cpu", lambda: infer_keywords(enc, ("leg", "hand", "spine", "chest", "ankle"), victims=victims,
                                                model=model, **kwargs))
        print(f"{'keyword ' + model:<16}{s:>12.3f}{'':>12}{'':>8}   s for 5 keywords incl. encoding "
              f"({2 * len(kwargs['shadow'])} training texts each)")
    from pytest_privleak.embeddings.corpora import restaurant_corpus

    public = restaurant_corpus(500, np.random.default_rng(3)).texts
    s = timed("cpu", lambda: infer_keywords(enc, ("leg", "hand", "spine", "chest", "ankle"), victims=victims,
                                            public=public, setting="black-box"))
    print(f"{'keyword dann':<16}{s:>12.3f}{'':>12}{'':>8}   s for 5 keywords incl. encoding (1000 public samples "
          "each, 50 epochs)")


if __name__ == "__main__":
    main()
