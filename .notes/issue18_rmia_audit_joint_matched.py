"""Issue 18 RMIA audit on the joint BiLSTM-CRF: online references of the target's size (300) vs the product's (950).

/work/venv/bin/python .notes/issue18_rmia_audit_joint_matched.py [n_shuffles]
Needs .notes/issue18_rmia_audit_joint.npz (issue18_rmia_audit_joint.py: same split, same target, online references
on halves of members + 1000 non-members + 600 population = 950 records each). Here the product's own
train_references(online=True) gets candidates = the 300 members + the first 300 non-members and no population, so
each reference trains on a complementary half of 600 = 300 records, the target's size. Both are evaluated on those
300 members vs 300 non-members (TPR at 1 % FPR: 3 false positives allowed).
"""
import random
import sys
import tempfile
import warnings

import numpy as np
import torch

torch.set_num_threads(1)
warnings.simplefilter("ignore")
from pytest_privleak.attacks.membership_figures import auc_from_statistics, tpr_at_fpr  # noqa: E402
from pytest_privleak.attacks.membership_lira import lira_online, logit_confidence  # noqa: E402
from pytest_privleak.attacks.membership_references import TargetRecipe, train_references  # noqa: E402
from pytest_privleak.attacks.membership_rmia import log_ratio  # noqa: E402
from pytest_privleak.cache.targets import TargetCache  # noqa: E402
from pytest_privleak.data.synthetic import generate_snips_like  # noqa: E402
from pytest_privleak.targets import train_target  # noqa: E402

n_shuffles = int(sys.argv[1]) if len(sys.argv) > 1 else 3
kind, config = "joint-bilstm-crf", {"progress": False}
cache = TargetCache(tempfile.mkdtemp(prefix="rmia_audit_joint_m_"))
J = np.load(".notes/issue18_rmia_audit_joint.npz")
K = 4
size = 2 * 1900
while True:
    corpus = generate_snips_like(n_train=size, n_valid=200, n_test=200, seed=3, unseen_share=0.5)
    base_pool = list(dict.fromkeys(corpus.train))
    if len(base_pool) >= 1900:
        break
    size *= 2
rows = {}
for s in range(n_shuffles):
    pool = list(base_pool)
    random.Random(s).shuffle(pool)
    members, non, pop = pool[:300], pool[300:1300], pool[1300:1900]
    data = corpus.replace(train=tuple(members), test=tuple(non + pop))
    target = train_target(kind, data, cache=cache, seed=0, **config)
    cand = members + non[:300]
    lt = target.score(cand)
    assert np.allclose(lt, J[f"s{s}_target"][:600]), "target differs from issue18_rmia_audit_joint.py's"
    recipe = TargetRecipe(data, kind=kind, config=config, cache=cache)
    on_m = train_references(recipe, cand, (), k=K, seed=s, online=True)
    lens = np.array([len(u.tokens) for u in cand], dtype=np.float64)
    variants = {"300 (target's size)": (np.stack([r.score(cand) for r in on_m.models]), on_m.trained_on(cand)),
                "950 (product pool)": (J[f"s{s}_on"][:, :600], J[f"s{s}_on_in"][:, :600])}
    for refs, (lr, inm) in variants.items():
        for scale, div in (("sequence NLL (product)", 1.0), ("per-token NLL", lens)):
            t, r = lt / div, lr / div
            for k in (2, 4):
                for name, stat in ((f"RMIA online k={k}", log_ratio(t, r[:k], None)),
                                   (f"LiRA online k={k}", lira_online(logit_confidence(t), logit_confidence(r[:k]), inm[:k]))):
                    rows.setdefault((scale, name, refs), []).append(
                        (auc_from_statistics(stat[:300], stat[300:]), tpr_at_fpr(stat[:300], stat[300:], 0.01).tpr))
            rows.setdefault((scale, "loss", "-"), []).append(
                (auc_from_statistics(-t[:300], -t[300:]), tpr_at_fpr(-t[:300], -t[300:], 0.01).tpr))
    print(f"shuffle {s} done", flush=True)
print(f"\njoint BiLSTM-CRF, {n_shuffles} shuffles, 300 members vs 300 non-members, mean AUC, TPR@1% (± s.e.)\n")
print("| likelihood | attack | references train on | AUC | TPR@1% |\n|---|---|---|---|---|")
for (scale, name, refs), v in rows.items():
    if name == "loss" and refs == "-" and (scale, name, refs) in rows and len(v) > n_shuffles:
        v = v[::2]                                  # the loss row was added once per reference variant
    v = np.array(v, dtype=float)
    se = v.std(0, ddof=1) / np.sqrt(len(v)) if len(v) > 1 else np.zeros(2)
    print(f"| {scale} | {name} | {refs} | {v[:, 0].mean():.3f} | {v[:, 1].mean():.3f} ± {se[1]:.3f} |")
