"""d-exposure against repetitions and epochs: the layout of d-exposure-discriminative Table 3, per training seed.

For each seed and each R in {0, 4, 16, 64, 256}, the paper's three phrases
("There are many people who like ___" with Williams as ORG, Chelsea as PER,
Melbourne as LOC) are inserted R times into the bundled synthetic NER corpus
(``data/synthetic_ner.py``, ``fixtures/ner_like``); the paper's tagger
(``ner-bilstm-crf`` defaults: BiLSTM-CRF, SGD 0.01 with momentum 0.9 and
decay 0.05, dropout 0.5, batch 10) is trained once per (seed, R) with
checkpoints, and d-exposure is measured at each named epoch on the public
API (``measure_d_exposure(..., epochs=...)``, W_i by the paper's rule).
Prints one Table 3 per seed, the mean over seeds, the entity F1 (conlleval,
Viterbi) of each final model, and whether d-exposure grows with R.

Differs from the paper: the synthetic corpus (600 sentences, 40 one-word
entities per class, so the ceiling is log2 41 = 5.36 bits, not ~10),
epochs 5 and 10 instead of 25 .. 150 (2 shared CPU cores), word vectors
trained from scratch (no GloVe), no character CNN.

Run: ``python bench/bench_d_exposure.py`` (about 5 minutes on one thread);
``--seeds``, ``--epochs``, ``--repeats``, ``--n-train`` change the grid.
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

from pytest_privleak.attacks.exposure.discriminative import PAPER_INSERTIONS, ambiguous_phrase, insert_phrases
from pytest_privleak.attacks.exposure.discriminative_assertion import measure_d_exposure, table3
from pytest_privleak.data.synthetic_ner import generate_ner_like
from pytest_privleak.results import LeakResult
from pytest_privleak.targets import train_target

CLASSES = ("LOC", "PER", "ORG")   # Table 3's column order


def ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def mean_rows(per_seed: list[dict[int, list[LeakResult]]]) -> dict[int, list[LeakResult]]:
    """Table rows whose per-class figures are the mean over seeds (for :func:`table3`)."""
    out = {}
    for repeats in per_seed[0]:
        rows = []
        for i, first in enumerate(per_seed[0][repeats]):
            extra = {k: statistics.mean(s[repeats][i].extra[k] for s in per_seed)
                     for k in first.extra if k.startswith("d_exposure_")}
            rows.append(LeakResult(attack="d-exposure", metric="mean over seeds", value=extra["d_exposure_mean"],
                                   extra={**extra, "epoch": first.extra["epoch"]}))
        out[repeats] = rows
    return out


def grows(rows: dict[int, list[LeakResult]], epoch: int) -> tuple[list[float], int, int]:
    """Mean d-exposure over classes at ``epoch`` for each R, and how many steps of R it rises / falls."""
    values = [next(r for r in rows[k] if r.extra["epoch"] == epoch).extra["d_exposure_mean"] for k in sorted(rows)]
    ups = sum(b > a for a, b in zip(values, values[1:]))
    downs = sum(b < a for a, b in zip(values, values[1:]))
    return values, ups, downs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--epochs", type=ints, default=[5, 10])
    parser.add_argument("--repeats", type=ints, default=[0, 4, 16, 64, 256])
    parser.add_argument("--n-train", type=int, default=600)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    corpus = generate_ner_like(n_train=args.n_train, n_valid=60, n_test=100, seed=0)
    phrases = [ambiguous_phrase(word, cls) for cls, word in PAPER_INSERTIONS.items()]
    inserted = {c: PAPER_INSERTIONS[c] for c in CLASSES}
    epochs, last = sorted(args.epochs), max(args.epochs)
    per_seed = []
    start = time.perf_counter()
    for seed in range(args.seeds):
        rows, f1 = {}, {}
        for repeats in args.repeats:
            target = train_target("ner-bilstm-crf", insert_phrases(corpus, phrases, repeats), seed=seed,
                                  progress=False, epochs=last, checkpoints=epochs)
            rows[repeats] = measure_d_exposure(target, inserted, class_words=corpus, epochs=epochs)
            f1[repeats] = target.entity_f1
        per_seed.append(rows)
        ceiling = rows[args.repeats[0]][0].ceiling
        print(f"\nseed {seed}: d-exposure (bits; ceiling {ceiling:.2f}) at epochs {epochs} "
              f"({time.perf_counter() - start:.0f} s so far)")
        print(table3(rows, CLASSES))
        print("entity F1 (valid / test) at epoch", last, ": " + ", ".join(
            f"R={r} {f['valid']['f1']:.3f} / {f['test']['f1']:.3f}" for r, f in f1.items()))
        values, ups, downs = grows(rows, last)
        print(f"mean over classes at epoch {last} by R: " + " ".join(f"{v:.2f}" for v in values)
              + f"  ({ups} rises, {downs} falls)")
    ties = [(seed, r, int(x.extra["epoch"]), c) for seed, rows in enumerate(per_seed) for r, results in rows.items()
            for x in results for c in CLASSES if x.extra.get(f"ties_{c}", 0) > 0]
    cells = args.seeds * len(args.repeats) * len(epochs) * len(CLASSES)
    print(f"\nranks with a class word tied with the inserted word at float resolution: {len(ties)} of {cells} "
          f"(seed, R, epoch, class){': ' + str(ties) if ties else ''}")
    mean = mean_rows(per_seed)
    print(f"\nmean over {args.seeds} seeds")
    print(table3(mean, CLASSES))
    for epoch in epochs:
        values, ups, downs = grows(mean, epoch)
        print(f"mean over classes and seeds at epoch {epoch} by R {args.repeats}: "
              + " ".join(f"{v:.2f}" for v in values) + f"  ({ups} rises, {downs} falls)")
    print(f"total {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
