"""PII exposure and extraction vs repetition count (issue 20 goal; Lukas et al. 2023 §5), one run, printed.

Trains the built-in ``lstm-lm`` target (the paper's model as is, and with early
stopping as a named defence) on the synthetic PII corpus
(:func:`pytest_privleak.data.synthetic_pii.generate_pii_corpus`: names, phone
numbers, e-mail addresses and street addresses made up by our generator, each
item in R = 1, 2, 5, 10, 20, 50 training tickets), audits every item found
(:func:`pytest_privleak.attacks.extraction.pii.attack.audit_pii`) and prints, per kind
and R, the mean exposure (bits, of its ceiling) and the share extracted by
prompting with the words before the item (10 beams).  The
row R = 0 audits items of the validation split, which no model trained on.

    /work/venv/bin/python bench/bench_pii.py [--references 1024] [--seed 0]
"""
from __future__ import annotations

import argparse
import time
from collections import defaultdict

import torch


def table(audit, repeats_of) -> dict:
    rows = defaultdict(list)
    for f in audit.measured:
        rows[(f.item.kind, repeats_of(f.item))].append(f)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--references", type=int, default=1024)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    from pytest_privleak.attacks.extraction.pii.attack import audit_pii
    from pytest_privleak.data.synthetic_pii import generate_pii_corpus
    from pytest_privleak.targets import train_target

    corpus = generate_pii_corpus(args.seed)
    repeats = {(p.kind, p.text): p.repeats for p in corpus.planted}
    unseen = [u for u in corpus.dataset.valid if any(t != "O" for t in u.tags)]
    spellable = [d for d in corpus.detectors() if d.kind != "email"]   # valid-only e-mails are words never trained
    print(f"corpus: {corpus.dataset.sizes} utterances, {len(corpus.planted)} planted items, "
          f"{len(unseen)} unseen validation tickets with PII")
    for label, config in (("lstm-lm (paper's model, 12 epochs)", {}),
                          ("lstm-lm + early stopping", {"early_stopping": True})):
        start = time.perf_counter()
        model = train_target("lstm-lm", corpus.dataset, seed=args.seed, progress=False, **config)
        trained = time.perf_counter() - start
        audit = audit_pii(model, corpus.dataset, corpus.detectors(), references=args.references, show_pii=True,
                          seed=args.seed)
        held_out = audit_pii(model, unseen, spellable, references=args.references, show_pii=True, seed=args.seed)
        audited = time.perf_counter() - start - trained
        rows = table(audit, lambda i: repeats.get((i.kind, i.text), -1))
        for key, figures in table(held_out, lambda i: 0).items():
            rows[key] = figures
        print(f"\n{label}: trained in {trained:.0f} s (stopped at epoch {model.history.stopped_epoch}), "
              f"audited {len(audit.figures) + len(held_out.figures)} items in {audited:.0f} s")
        print(f"{'kind':<8} {'R':>3} {'items':>5} {'exposure bits (mean)':>21} {'ceiling':>8} {'extracted (beam 10)':>20}")
        for kind, r in sorted(rows, key=lambda k: (k[0], k[1])):
            figures = rows[(kind, r)]
            exposure = sum(f.exposure.value for f in figures) / len(figures)
            extracted = sum(f.extracted for f in figures)
            print(f"{kind:<8} {r:>3} {len(figures):>5} {exposure:>21.2f} {figures[0].exposure.ceiling:>8.1f} "
                  f"{extracted:>16}/{len(figures):<3}")


if __name__ == "__main__":
    main()
