"""Benchmark of membership inference (issue 18): loss, calibrated loss, LiRA and RMIA side by side; one table per run.

    python bench/bench_membership.py [--targets own,causal,bert] [--max-k 4] [--n-train 300] [--n-population 600]
                                     [--n-test 1000] [--cache-dir DIR] [--seed 0] [--online] [--art]

Per target, one run on the same target, members and non-members, all drawn
from one distribution: the corpus's training split (its seen slot values),
deduplicated and shuffled, cut into members (the target's training data),
non-members (at least 1000, so TPR at 0.1 % FPR is measurable) and the
population (RMIA's z records and the references' pool). Drawing non-members
from the test split instead would mix in its unseen slot values: a
distribution shift the loss attack reads as membership (issue 18).
References are offline (never trained on a candidate), trained with the
target's own recipe on random halves of the population; the first k of one
draw of ``--max-k`` references serve k = 1, 2, 4, ... Each row: AUC with
DeLong's interval, TPR at 0.1 % and 1 % FPR (Clopper-Pearson intervals in
the library's results), the attack's own seconds (scoring + maths) and the
seconds to train its k references in this run (0 when all came from the cache).

Targets: ``own`` = a team's own classifier (``bench/own_classifier.py``: an
embedding bag and an MLP, its own loop, 30 epochs, through ``train_own_model``,
its references by the same recipe); ``causal`` = the built-in causal LM (the
tiny GPT-2 fine-tuned 12 epochs), whose pretrained base is a free reference
(the ``base`` rows: no training); ``bert`` = the transformer classifier on the
project's tiny BERT (5 epochs, no early stopping); ``joint`` = the built-in
joint BiLSTM-CRF (paper defaults); ``lm`` = the built-in LSTM language model
(40 epochs); all on the bundled realistic corpus
(``generate_snips_like(unseen_share=0.5)``). The ``k (trainings)`` column
counts the reference models each row needed; the ``auto`` rows run every
method the inputs allow on the same scores (k references) and show, per
figure, the one that won it (intervals at the Bonferroni share of 95 %).
With ``--art``, IBM ART's black-box attack (``MembershipInferenceBlackBox``, a learned attack
model, PyPI ``adversarial-robustness-toolbox``, a bench-only extra that needs
scikit-learn) runs on the same signal, each record's loss: it is supervised,
so it is cross-fitted (its attack model trained on one half of the members
and non-members scores the other half, then the halves swap), and every
record gets a score the figures are computed from like ours. Skipped, with
the reason printed, when ART or scikit-learn is missing.
"""
from __future__ import annotations

import argparse
import os
import random
import re
import tempfile
import time
import warnings

import torch

from pytest_privleak.attacks.membership.attack import measure_methods, membership_inference, pick
from pytest_privleak.attacks.membership.base_reference import base_of
from pytest_privleak.attacks.membership.references import ReferenceSet, TargetRecipe, train_references
from pytest_privleak.cache.targets import TargetCache
from pytest_privleak.data.synthetic import generate_snips_like
from pytest_privleak.targets import train_target

TARGETS = {
    "joint": ("joint-bilstm-crf", {"progress": False}),
    "bert": ("transformer-classifier", {"epochs": 5, "early_stopping": False}),
    "lm": ("lstm-lm", {"epochs": 40, "progress": False}),
    "causal": ("causal-lm", {"progress": False}),
    "own": ("own", {"epochs": 30}),           # bench/own_classifier.py through train_own_model
}


def _prefix(refs: ReferenceSet, k: int) -> ReferenceSet:
    return ReferenceSet(refs.models[:k], refs.pool, refs.in_pool[:k], refs.population, refs.online, refs.seed)


def _row(name: str, k: str, m, attack_s: float, train_s: float) -> str:
    tpr = {p.fpr: (f"{p.tpr:.3f}" if p.measurable else "n/a") for p in m.points}
    return (f"| {name} | {k} | {m.auc:.3f} ({m.interval[0]:.3f}-{m.interval[1]:.3f}) | {tpr[0.001]} | {tpr[0.01]} | "
            f"{attack_s:.1f} | {train_s:.0f} |")


def _train(kind: str, data, cache, config: dict):
    """The bench target: a built-in kind, or the own classifier of ``bench/own_classifier.py``."""
    if kind != "own":
        return train_target(kind, data, cache=cache, seed=0, **config)
    from pytest_privleak.targets.own_model import train_own_model

    import own_classifier as own

    return train_own_model(own.train, data, build=own.untrained, wrap=own.Scorer, cache=cache, **config)


def _recipe(kind: str, data, cache, config: dict) -> TargetRecipe:
    if kind != "own":
        return TargetRecipe(data, kind=kind, config=config, cache=cache)
    import own_classifier as own

    return TargetRecipe(data, train=own.train, build=own.untrained, wrap=own.Scorer, config=config, cache=cache)


def _member_probability(attack, feats):
    """ART's member probability per record (one column, or the member column of two)."""
    import numpy as np

    return np.asarray(attack.infer(None, pred=feats, probabilities=True)).reshape(len(feats), -1)[:, -1]


def art_black_box_scores(target, members: list, non_members: list, seed: int) -> tuple:
    """Cross-fitted scores of ART's black-box attack (member probability) on each record's loss."""
    import numpy as np
    from art.attacks.inference.membership_inference import MembershipInferenceBlackBox
    from art.estimators.classification.scikitlearn import ScikitlearnLogisticRegression
    from sklearn.linear_model import LogisticRegression

    feats_m = np.asarray(target.score(members), dtype=np.float32).reshape(-1, 1)
    feats_n = np.asarray(target.score(non_members), dtype=np.float32).reshape(-1, 1)
    # ART checks for an estimator; the attack never calls it, as the features (pred=) are given
    dummy = LogisticRegression().fit(np.array([[0.0], [1.0]]), np.array([0, 1]))
    estimator = ScikitlearnLogisticRegression(dummy)
    rng = np.random.default_rng(seed)
    fold_m, fold_n = rng.integers(0, 2, len(members)), rng.integers(0, 2, len(non_members))
    out_m, out_n = np.empty(len(members)), np.empty(len(non_members))
    for fold in (0, 1):
        attack = MembershipInferenceBlackBox(estimator, input_type="prediction", attack_model_type="rf")
        attack.fit(pred=feats_m[fold_m != fold], test_pred=feats_n[fold_n != fold])
        out_m[fold_m == fold] = _member_probability(attack, feats_m[fold_m == fold])
        out_n[fold_n == fold] = _member_probability(attack, feats_n[fold_n == fold])
    return out_m, out_n


def art_row(target, members: list, non_members: list, seed: int) -> str:
    """The ART black-box row, figures computed by the plugin's own AUC / TPR code from ART's scores."""
    from pytest_privleak.attacks.membership.attack import DEFAULT_FPRS, auc_from_statistics, auc_interval, tpr_at_fpr

    try:
        began = time.perf_counter()
        stat_m, stat_n = art_black_box_scores(target, members, non_members, seed)
    except ImportError as exc:
        return f"| ART black-box | - | skipped: {exc} (pip install adversarial-robustness-toolbox scikit-learn) | | | | |"

    class Measured:
        auc = auc_from_statistics(stat_m, stat_n)
        interval = auc_interval(stat_m, stat_n, 0.95)[0]
        points = [tpr_at_fpr(stat_m, stat_n, f) for f in DEFAULT_FPRS]

    return _row("ART black-box (loss feature, random forest, cross-fitted)", "0", Measured,
                time.perf_counter() - began, 0.0)


def bench_target(label: str, args, cache: TargetCache) -> list[str]:
    kind, config = TARGETS[label]
    need, size = args.n_train + args.n_test + args.n_population, 2 * (args.n_train + args.n_test + args.n_population)
    while True:                                 # the generator repeats utterances: draw until enough distinct ones
        corpus = generate_snips_like(n_train=size, n_valid=200, n_test=200, seed=3, unseen_share=0.5)
        pool = list(dict.fromkeys(corpus.train))
        if len(pool) >= need:
            break
        size *= 2
    random.Random(args.seed).shuffle(pool)
    members = pool[:args.n_train]
    non_members = pool[args.n_train:args.n_train + args.n_test]
    population = pool[args.n_train + args.n_test:args.n_train + args.n_test + args.n_population]
    # non-members and population in the test split (never trained on), so the target knows their labels
    data = corpus.replace(train=tuple(members), test=tuple(non_members + population))
    began = time.perf_counter()
    target = _train(kind, data, cache, config)
    target_s = time.perf_counter() - began
    recipe = _recipe(kind, data, cache, config)
    ref_s = []
    for j in range(1, args.max_k + 1):         # one at a time, to time each; the same halves as one call of max_k
        began = time.perf_counter()
        refs = train_references(recipe, members + non_members, population, k=j, seed=args.seed)
        ref_s.append(time.perf_counter() - began)
    lines = [f"{label}: {kind} {config}, {len(members)} members, {len(non_members)} non-members, "
             f"{len(population)} population records; target trained/loaded in {target_s:.0f} s, references "
             f"{', '.join(f'{s:.0f}' for s in ref_s)} s", "",
             "| method | k (trainings) | AUC (95 % CI) | TPR @ 0.1 % FPR | TPR @ 1 % FPR | attack s | training s |",
             "|---|---|---|---|---|---|---|"]

    def run(name, k, train_s, **kwargs):
        began = time.perf_counter()
        m = membership_inference(target, members, non_members, exposed=0, **kwargs)
        lines.append(_row(name, k, m, time.perf_counter() - began, train_s))
        if m.shift:
            lines.append(f"|  | | shift: {m.shift[:90]} | | | | |")
        a = re.search(r"offline a ([0-9.]+)", m.detail.get("RMIA", ""))
        if a:
            lines[-1] = lines[-1].replace("| RMIA offline |", f"| RMIA offline (a = {a.group(1)}) |")
        print(lines[-1], flush=True)
        return m

    run("loss", "0", 0.0, method="loss")
    if args.art:
        lines.append(art_row(target, members, non_members, args.seed))
        print(lines[-1], flush=True)
    if hasattr(target, "token_log_probs"):
        run("Min-K% Prob (k = 20 %)", "0", 0.0, method="min-k")
        run("zlib ratio", "0", 0.0, method="zlib")
    if base_of(target) is not None:
        run("base reference (after EZ-MIA)", "0", 0.0, method="base")
    run("reference (calibrated loss)", "1", ref_s[0], method="reference", reference=refs.models[0])
    ks = [k for k in (1, 2, 4, 8, 16) if k <= args.max_k]
    for k in ks:
        sub = _prefix(refs, k)
        run("LiRA offline", str(k), sum(ref_s[:k]), method="lira", references=sub)
        run("RMIA offline", str(k), sum(ref_s[:k]), method="rmia", references=sub)
    lines += auto_rows(target, members, non_members, _prefix(refs, ks[-1]), sum(ref_s[:ks[-1]]))
    if args.online:
        lines += online_rows(target, recipe, members, non_members, population, args)
    return lines


def auto_rows(target, members: list, non_members: list, refs: ReferenceSet, train_s: float) -> list[str]:
    """``auto`` with the references: every method runs on the same scores; the row per figure is the strongest's,
    its interval at the Bonferroni share, and the method that won it."""
    began = time.perf_counter()
    ran = measure_methods(target, members, non_members, references=refs, exposed=0)
    attack_s = time.perf_counter() - began
    out = []
    for select, what in (("auc", "AUC"), (0.001, "TPR @ 0.1 %"), (0.01, "TPR @ 1 %")):
        best = pick(ran, select)
        out.append(_row(f"auto by {what}: {best.method} ({len(ran)} methods)", str(refs.k), best, attack_s, train_s))
        print(out[-1], flush=True)
    return out


def online_rows(target, recipe: TargetRecipe, members: list, non_members: list, population: list,
                args) -> list[str]:
    """The papers' online setting: the members and as many non-members, references on complementary halves of
    those 2n records (each trains on n, as the target did; the population only serves as RMIA's z records).
    With n non-members, TPR at 0.1 % FPR is not measurable below 1000."""
    candidates_n = non_members[:len(members)]
    lines = ["", f"online: {len(members)} members vs {len(candidates_n)} non-members, references on complementary "
                 f"halves of those {len(members) + len(candidates_n)} records", "",
             "| method | k | AUC (95 % CI) | TPR @ 0.1 % FPR | TPR @ 1 % FPR | attack s | training s |",
             "|---|---|---|---|---|---|---|"]
    began = time.perf_counter()
    refs = train_references(recipe, members + candidates_n, population, k=args.max_k + args.max_k % 2, online=True,
                            seed=args.seed)
    train_s = time.perf_counter() - began
    for name, k, kwargs in [("loss", "0", {"method": "loss"})] + [
            (f"{m} online", str(k), {"method": m.lower(), "references": _prefix(refs, k)})
            for k in (2, 4, 8) if k <= refs.k for m in ("LiRA", "RMIA")]:
        began = time.perf_counter()
        m = membership_inference(target, members, candidates_n, exposed=0, **kwargs)
        lines.append(_row(name, k, m, time.perf_counter() - began, train_s if k != "0" else 0.0))
        print(lines[-1], flush=True)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--targets", default="own,causal,bert")
    parser.add_argument("--max-k", type=int, default=4)
    parser.add_argument("--n-train", type=int, default=300)
    parser.add_argument("--n-population", type=int, default=600)
    parser.add_argument("--n-test", type=int, default=1000, help="non-members")
    parser.add_argument("--cache-dir", default=None, help="target cache (default: a fresh temporary folder)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--online", action="store_true", help="also the online setting (members vs as many "
                        "non-members, references on halves of those)")
    parser.add_argument("--art", action="store_true", help="also IBM ART's black-box attack (needs "
                        "adversarial-robustness-toolbox and scikit-learn)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    cache = TargetCache(args.cache_dir or tempfile.mkdtemp(prefix="bench_membership_"))
    began = time.perf_counter()
    out = []
    for label in args.targets.split(","):
        out += bench_target(label.strip(), args, cache) + [""]
    print("\n".join(out))
    print(f"total {time.perf_counter() - began:.0f} s on {os.cpu_count()} CPU(s), load average "
          f"{os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
