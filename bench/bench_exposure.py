"""Exact exposure over a 10^4 pin space vs the bare batched forward passes it needs.

Prints, for the LSTM language model and the joint intent+slot model, the
median wall time of ``compute_exposure(method="exact")`` over the 10^4
candidates of a 4-digit pin, the median time of the same forward passes on a
prebuilt id tensor (``score_token_ids`` in the same batches, nothing else),
and their ratio (goal <= 1.2).  Run: ``python bench/bench_exposure.py``.

``--figures`` also prints the memorisation figures of the slow tests: mean
exact exposure of 4 pins repeated R in {1, 10, 100} times (LSTM LM), and
d-exposure of the paper's three insertions repeated 0, 4, 16, 64 times
(BiLSTM-CRF tagger on the synthetic NER corpus; d-exposure-discriminative
Table 3 / Fig. 1 shape).
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

from pytest_privleak.attacks.candidates import enumerate_space
from pytest_privleak.attacks.exposure.attack import DEFAULT_BATCH, compute_exposure
from pytest_privleak.canaries import canary, inject_canaries
from pytest_privleak.data.synthetic import generate_snips_like
from pytest_privleak.targets import train_target


def interleaved_medians(first, second, repeats: int) -> tuple[float, float]:
    """Median seconds of two functions timed alternately (so load from other processes hits both alike)."""
    first(), second()  # warm-up
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(repeats):
        for fn, out in ((first, times[0]), (second, times[1])):
            start = time.perf_counter()
            fn()
            out.append(time.perf_counter() - start)
    return statistics.median(times[0]), statistics.median(times[1])


def bare_forward(target, pin, batch_size: int):
    """Exactly the model work of exact exposure: all 10^4 candidates' ids, scored in the same batches."""
    pattern = pin.pattern
    prefix = torch.tensor(target.vocab.token_ids(pattern.prefix))
    v0 = torch.tensor(target.vocab.token_ids(pattern.vocabulary))
    secrets = enumerate_space(len(pattern.vocabulary), pattern.length, budget=None)
    ids = torch.cat([prefix.expand(secrets.shape[0], -1), v0[secrets]], dim=1)
    batches = list(ids.split(batch_size))

    def run():
        with torch.inference_mode():
            for batch in batches:
                target.score_token_ids(batch, pattern.intent, pattern.tags)
    return run


def print_figures() -> None:
    from pytest_privleak.attacks.exposure.discriminative import (PAPER_INSERTIONS, ambiguous_phrase, d_exposure,
                                                    exclusive_class_words, insert_phrases)
    from pytest_privleak.data.synthetic_ner import NER_CLASSES, generate_ner_like

    pins = [canary("pin", 4, seed=s) for s in range(4)]
    corpus = generate_snips_like(n_train=800, n_valid=80, n_test=0, seed=0)
    print("\nexposure (bits, exact, 4-digit pins; ceiling 13.29, chance 1.44) of an LSTM LM, 4 pins injected R times")
    for repeats in (1, 10, 100):
        model = train_target("lstm-lm", inject_canaries(corpus, pins, repeats=repeats), progress=False, epochs=3,
                             hidden_dim=64)
        values = [compute_exposure(model, c).value for c in pins]
        print(f"  R={repeats:<4} mean {statistics.mean(values):6.2f}   per pin " + " ".join(f"{v:5.2f}" for v in values))
    ner = generate_ner_like(n_train=600, n_valid=60, n_test=100, seed=0)
    words = exclusive_class_words(ner, NER_CLASSES)
    phrases = [ambiguous_phrase(w, c) for c, w in PAPER_INSERTIONS.items()]
    print("\nd-exposure (bits) of a BiLSTM-CRF tagger, phrase 'There are many people who like ___' inserted R times")
    for repeats in (0, 4, 16, 64):
        tagger = train_target("ner-bilstm-crf", insert_phrases(ner, phrases, repeats), progress=False, epochs=6)
        m = d_exposure(tagger, PAPER_INSERTIONS, words)
        per = "  ".join(f"{c} {p.value:4.2f}" for c, p in m.per_class.items())
        print(f"  R={repeats:<4} mean {m.value:5.2f}   {per}   (chance {m.chance:.2f}, ceiling {m.ceiling:.2f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=DEFAULT_BATCH)
    parser.add_argument("--figures", action="store_true", help="also print exposure / d-exposure vs repetitions")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    pin = canary("pin", 4, seed=0)
    data = inject_canaries(generate_snips_like(n_train=600, n_valid=60, n_test=0), pin, repeats=10)
    targets = {
        "lstm-lm": train_target("lstm-lm", data, progress=False, epochs=2, hidden_dim=64),
        "joint-bilstm-crf": train_target("joint-bilstm-crf", data, progress=False, epochs=2, embedding_dim=32,
                                         hidden_dim=32),
    }
    print(f"exact exposure over {pin.pattern.space_size} candidates, batch {args.batch_size}, "
          f"{args.threads} thread(s), median of {args.repeats}")
    print(f"{'target':<18} {'exposure s':>11} {'forward s':>10} {'ratio':>7}  exposure")
    for name, target in targets.items():
        exposure, forward = interleaved_medians(
            lambda: compute_exposure(target, pin, method="exact", batch_size=args.batch_size),
            bare_forward(target, pin, args.batch_size), args.repeats)
        value = compute_exposure(target, pin, method="exact", batch_size=args.batch_size).value
        print(f"{name:<18} {exposure:>11.4f} {forward:>10.4f} {exposure / forward:>7.3f}  {value:.2f} bits")
    if args.figures:
        print_figures()


if __name__ == "__main__":
    main()
