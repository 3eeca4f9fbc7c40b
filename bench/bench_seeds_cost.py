"""The price of k training seeds (issue 35): each built-in target's k seeds trained as one stack vs one by one.

    python bench/bench_seeds_cost.py [--targets joint,lm,ner] [--k 7] [--epochs 2] [--skip-old7]
    python bench/bench_seeds_cost.py --sample [--baseline-ref main] [--k 7]

For each recurrent target, in one process on this CPU (one torch thread), side by side:

* ``old1``: one seed on the training path before issue 35 (``nn.LSTM`` with
  packed sequences, pytorch-crf's forward algorithm, :func:`training.fit`),
  reproduced here from the pre-35 code;
* ``new1``: one seed on the stacked path (a stack of one, the path every
  training now takes);
* ``new_k``: k seeds as one stack (:func:`pytest_privleak.targets.train_targets`);
* ``old_k``: k seeds one after another on the pre-35 path (``--skip-old7``:
  estimated as k x ``old1`` instead);
* ``lanes_k``: k seeds as ``--lanes`` stacks trained at once in threads (default: the cores this
  process may use; what a pytest run without xdist workers does), each on one torch thread.

It prints the seconds and the ratios ``old_k / new_k`` (what k seeds cost
less now), ``new1 / old1`` (what one seed costs now; above 1 would mean a
single seed pays for stacking) and ``new_k / new1`` (the price of k seeds in
seeds), and ``new_k / lanes_k`` (what the lanes save). The data are the sample project's: the 1500-utterance generated Snips-like corpus with a
4-digit pin said 100 times (joint model, language model) and a generated CoNLL-like corpus of 1000
sentences (tagger), with each target's default config but ``--epochs`` (default 2: the costs per epoch
are what is compared). The transformer targets (``causal-lm``, ``transformer-classifier``) are not
stacked and train their seeds one by one; they are listed as such.

``--sample`` times the sample project's suite instead (``bench/bench_suite.py``'s
runner: a copy of the project, a frozen copy of the package, an empty target
cache per run): cold at ``--privleak-seeds 1`` and cold at ``--privleak-seeds k``,
one after the other, with the ratio (issue 35 asks <= 2.5 for 7 seeds, with the
own-model seeds spread over workers), and the outcome line of each run (the
verdicts must not change with k). ``--baseline-ref REF`` adds the same two runs
with the package of the git ref ``REF`` (e.g. ``main`` before this change).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pytest_privleak.canaries import canary, inject_canaries  # noqa: E402
from pytest_privleak.data.synthetic import generate_snips_like  # noqa: E402
from pytest_privleak.data.synthetic_ner import generate_ner_like  # noqa: E402
from pytest_privleak.targets import STACKED, parallel, train_targets  # noqa: E402
from pytest_privleak.targets import joint_nlu, lstm_lm, ner_tagger, training  # noqa: E402
from pytest_privleak.targets.unk_training import (drop_to_unk, finish_unk_rows, rare_word_rows,  # noqa: E402
                                                  set_unk_row, unk_probabilities)
from pytest_privleak.targets.vocab import Vocabulary  # noqa: E402

KINDS = {"joint": "joint-bilstm-crf", "lm": "lstm-lm", "ner": "ner-bilstm-crf"}
CPU = torch.device("cpu")


def old_joint(dataset, config: joint_nlu.JointNLUConfig, seed: int) -> None:
    """The joint model's training before issue 35 (joint_nlu.build without DP)."""
    vocab = Vocabulary.from_dataset(dataset, config.extra_tokens)
    width = joint_nlu.char_width(config)
    train_items = joint_nlu.encode_utterances(vocab, dataset.train, width)
    valid_items = joint_nlu.encode_utterances(vocab, dataset.valid, width)
    unk_probs = unk_probabilities(vocab, dataset.train, config.unk_alpha, CPU)
    rare = rare_word_rows(vocab, dataset.train) if config.unk_alpha == 0.0 else None

    def loss(net, batch):
        if net.training:
            batch = joint_nlu.dataclasses.replace(batch, ids=drop_to_unk(batch.ids, unk_probs))
        elif rare is not None:
            set_unk_row(net.word_embedding.weight, rare)
        return joint_nlu.batch_loss(net, batch)

    with training.seeded(seed, CPU):
        net = joint_nlu.JointNLUNet(vocab, config)
        training.fit(net, loss, train_items, valid_items, lambda items: joint_nlu.collate(items, CPU),
                     epochs=config.epochs, batch_size=config.batch_size, lr=config.lr, seed=seed,
                     early_stopping=config.early_stopping, patience=config.patience,
                     grad_clip=config.grad_clip or None, progress=False)
        finish_unk_rows(net.word_embedding.weight, vocab, dataset.train, config.unk_alpha)


def old_lm(dataset, config: lstm_lm.LSTMLMConfig, seed: int) -> None:
    """The language model's training before issue 35 (lstm_lm.build)."""
    vocab = Vocabulary.from_dataset(dataset, config.extra_tokens)
    train_items = [vocab.token_ids(u.tokens) for u in dataset.train]
    valid_items = [vocab.token_ids(u.tokens) for u in dataset.valid]
    unk_probs = unk_probabilities(vocab, dataset.train, config.unk_alpha, CPU)
    rare = rare_word_rows(vocab, dataset.train) if config.unk_alpha == 0.0 else None

    def loss(net, batch):
        ids, lengths = batch
        if not net.training:
            if rare is not None:
                set_unk_row(net.embedding.weight, rare)
            return net.nll(ids, lengths)
        return net.nll(ids, lengths, drop_to_unk(ids, unk_probs))

    with training.seeded(seed, CPU):
        net = lstm_lm.LSTMLMNet(len(vocab.tokens), config)
        training.fit(net, loss, train_items, valid_items, lambda items: lstm_lm._collate(items, CPU),
                     epochs=config.epochs, batch_size=config.batch_size, lr=config.lr, seed=seed,
                     early_stopping=config.early_stopping, patience=config.patience,
                     grad_clip=config.grad_clip or None, progress=False)
        finish_unk_rows(net.embedding.weight, vocab, dataset.train, config.unk_alpha)


def old_ner(dataset, config: ner_tagger.NERTaggerConfig, seed: int) -> None:
    """The tagger's training before issue 35 (ner_tagger.build_epochs, one epoch key), entity F1 included."""
    vocab = Vocabulary.from_dataset(dataset, config.extra_tokens)
    encode = lambda items: [(vocab.token_ids(u.tokens), vocab.tag_ids(u.tags)) for u in items]  # noqa: E731
    unk_probs = unk_probabilities(vocab, dataset.train, config.unk_alpha, CPU)

    def loss(net, batch):
        ids, tags, mask, lengths = batch
        if net.training:
            ids = drop_to_unk(ids, unk_probs)
        return net.nll(ids, tags, mask, lengths)

    with training.seeded(seed, CPU):
        net = ner_tagger.NERTaggerNet(vocab, config)
        history = training.fit(
            net, loss, encode(dataset.train), encode(dataset.valid), lambda items: ner_tagger._collate(items, CPU),
            epochs=config.epochs, batch_size=config.batch_size, lr=config.lr, seed=seed,
            early_stopping=config.early_stopping, patience=config.patience, grad_clip=config.grad_clip or None,
            progress=False, optimizer=config.optimizer, momentum=config.momentum, lr_decay=config.lr_decay)
        finish_unk_rows(net.embedding.weight, vocab, dataset.train, config.unk_alpha)
        target = ner_tagger.NERTagger(net, vocab, config, seed=seed, history=history, content_hash="old")
        target.facts.update(ner_tagger._split_f1(target, dataset))


OLD = {"joint": (old_joint, joint_nlu.JointNLUConfig), "lm": (old_lm, lstm_lm.LSTMLMConfig),
       "ner": (old_ner, ner_tagger.NERTaggerConfig)}


def datasets() -> dict:
    snips = inject_canaries(generate_snips_like(n_train=1500, n_valid=200, n_test=200, seed=0),
                            canary("pin", 4), repeats=100)
    return {"joint": snips, "lm": snips, "ner": generate_ner_like(n_train=1000, n_valid=100, n_test=100, seed=0)}


def seconds(fn) -> float:
    began = time.perf_counter()
    fn()
    return time.perf_counter() - began


def package_at(ref: str, into: Path) -> dict:
    """An environment importing the package (and its fixtures) of the git ref ``ref``, frozen under ``into``."""
    import subprocess

    import bench_suite

    root = Path(__file__).resolve().parent.parent
    source = into.parent / f"{into.name}-source"
    source.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(root), "archive", ref, "pytest_privleak", "fixtures"],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(source)], input=archive, check=True)
    return bench_suite.snapshot_package(into, source=source)


def sample(k: int, baseline: str | None) -> None:
    """The sample project cold at 1 and at ``k`` seeds (and with the package of ``baseline``), side by side."""
    import shutil
    import tempfile

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import bench_suite

    work = Path(tempfile.mkdtemp(prefix="privleak-seeds-cost-"))
    try:
        project = bench_suite.copy_sample(work)
        packages = {"this tree": bench_suite.snapshot_package(work / "package")}
        if baseline:
            packages[baseline] = package_at(baseline, work / "baseline")
        print(f"sample project cold runs, {os.cpu_count()} CPUs; wall seconds, load before -> after")
        for label, env in packages.items():
            runs = {}
            for seeds in (1, k):
                tag = f"{label.replace(' ', '-')}-{seeds}"
                runs[seeds] = bench_suite.run_suite(project, work / f"cache-{tag}", work / f"report-{tag}",
                                                    f"--privleak-seeds={seeds}", env=env)
                print(f"  {label:10} seeds={seeds}  {bench_suite.line('cold', runs[seeds])}", flush=True)
            print(f"  {label:10} cold k={k} / cold k=1 = {runs[k]['seconds'] / runs[1]['seconds']:.2f} "
                  "(issue 35 goal <= 2.5)", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", default="joint,lm,ner")
    parser.add_argument("--k", type=int, default=7)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--skip-old7", action="store_true", help="estimate k seeds one by one as k x old1")
    parser.add_argument("--lanes", type=int, default=parallel.usable_cores(),
                        help="stacks trained at once for lanes_k (default: the cores this process may use)")
    parser.add_argument("--sample", action="store_true", help="time the sample project cold at 1 and k seeds")
    parser.add_argument("--baseline-ref", default=None, help="with --sample: also run the package of this git ref")
    args = parser.parse_args()
    if args.sample:
        sample(args.k, args.baseline_ref)
        return
    torch.set_num_threads(1)
    data = datasets()
    k = args.k
    print(f"k = {k} seeds, {args.epochs} epoch(s) each, one torch thread; seconds, measured side by side in one run")
    print(f"{'target':18} {'old1':>7} {'new1':>7} {'old_k':>8} {'new_k':>8} {'old_k/new_k':>11} {'new1/old1':>9} "
          f"{'new_k/new1':>10} {'lanes_k':>8} {'new_k/lanes_k':>13}")
    for name in args.targets.split(","):
        kind = KINDS[name]
        old, config_cls = OLD[name]
        config = config_cls(epochs=args.epochs)
        dataset = data[name]
        fields = {"epochs": args.epochs}
        train_targets(kind, [(dataset, 100)], progress=False, **fields)      # warm-up: imports, first-call costs
        old1 = seconds(lambda: old(dataset, config, 0))
        new1 = seconds(lambda: train_targets(kind, [(dataset, 0)], progress=False, **fields))
        new_k = seconds(lambda: train_targets(kind, [(dataset, s) for s in range(k)], progress=False, **fields))
        parallel.configure(processes=args.lanes)
        lanes_k = seconds(lambda: train_targets(kind, [(dataset, s) for s in range(k)], progress=False, **fields))
        parallel.configure(processes=1)
        if args.skip_old7:
            old_k, mark = k * old1, "~"
        else:
            old_k, mark = seconds(lambda: [old(dataset, config, s) for s in range(k)]), " "
        print(f"{kind:18} {old1:7.1f} {new1:7.1f} {mark}{old_k:7.1f} {new_k:8.1f} {old_k / new_k:11.2f} "
              f"{new1 / old1:9.2f} {new_k / new1:10.2f} {lanes_k:8.1f} {new_k / lanes_k:13.2f}", flush=True)
    for kind in ("causal-lm", "transformer-classifier"):
        if kind not in STACKED:
            print(f"{kind:18} not stacked: its seeds train one by one")


if __name__ == "__main__":
    main()
