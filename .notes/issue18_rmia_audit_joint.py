"""Issue 18 RMIA audit on the built-in joint BiLSTM-CRF (the bench's `joint` target and split), varying one thing.

/work/venv/bin/python .notes/issue18_rmia_audit_joint.py [n_shuffles]
Split as bench/bench_membership.py (generate_snips_like seed 3, unseen_share 0.5, training-split pool shuffled with
seed s: 300 members, 1000 non-members, 600 population). References through the product's train_references
(offline k=4 on halves of the population; online k=4 on halves of candidates + population). The score is the
product's loss (intent CE + CRF NLL of the whole tag sequence, many nats); variants divide it by the number of
tokens (the per-token mean the authors' Privacy Meter uses for sequence models). Saves per-record losses to
.notes/issue18_rmia_audit_joint.npz and prints the table.
"""
import random
import sys
import tempfile
import time
import warnings

import numpy as np
import torch

torch.set_num_threads(1)
warnings.simplefilter("ignore")
from pytest_privleak.attacks.membership_figures import auc_from_statistics, tpr_at_fpr  # noqa: E402
from pytest_privleak.attacks.membership_lira import lira_offline, lira_online, logit_confidence  # noqa: E402
from pytest_privleak.attacks.membership_references import TargetRecipe, train_references  # noqa: E402
from pytest_privleak.attacks.membership_rmia import A_GRID, log_ratio, tune_offline_a  # noqa: E402
from pytest_privleak.cache.targets import TargetCache  # noqa: E402
from pytest_privleak.data.synthetic import generate_snips_like  # noqa: E402
from pytest_privleak.targets import train_target  # noqa: E402
from scipy.special import logsumexp  # noqa: E402

n_shuffles = int(sys.argv[1]) if len(sys.argv) > 1 else 3
kind, config = "joint-bilstm-crf", {"progress": False}
cache = TargetCache(tempfile.mkdtemp(prefix="rmia_audit_joint_"))
K = 4
saved = {}
t0 = time.time()
size = 2 * 1900
while True:
    corpus = generate_snips_like(n_train=size, n_valid=200, n_test=200, seed=3, unseen_share=0.5)
    base_pool = list(dict.fromkeys(corpus.train))
    if len(base_pool) >= 1900:
        break
    size *= 2
for s in range(n_shuffles):
    pool = list(base_pool)
    random.Random(s).shuffle(pool)
    members, non, pop = pool[:300], pool[300:1300], pool[1300:1900]
    data = corpus.replace(train=tuple(members), test=tuple(non + pop))
    target = train_target(kind, data, cache=cache, seed=0, **config)
    recipe = TargetRecipe(data, kind=kind, config=config, cache=cache)
    off = train_references(recipe, members + non, pop, k=K, seed=s, online=False)
    on = train_references(recipe, members + non, pop, k=K, seed=s, online=True)
    everything = members + non + pop
    saved[f"s{s}_target"] = target.score(everything)
    saved[f"s{s}_off"] = np.stack([r.score(everything) for r in off.models])
    saved[f"s{s}_on"] = np.stack([r.score(everything) for r in on.models])
    saved[f"s{s}_off_in"] = off.trained_on(everything)
    saved[f"s{s}_on_in"] = on.trained_on(everything)
    saved[f"s{s}_len"] = np.array([len(u.tokens) for u in everything], dtype=np.float64)
    print(f"shuffle {s} done {time.time() - t0:.0f}s", flush=True)
np.savez(".notes/issue18_rmia_audit_joint.npz", n=n_shuffles, **saved)


def figures(stat):
    s = np.asarray(stat, dtype=np.float64)
    return auc_from_statistics(s[:300], s[300:1300]), tpr_at_fpr(s[:300], s[300:1300], 0.01).tpr, \
        tpr_at_fpr(s[:300], s[300:1300], 0.001).tpr


rows = {}
for s in range(n_shuffles):
    n_len = saved[f"s{s}_len"]
    cand, pop = slice(0, 1300), slice(1300, 1900)
    for scale_name, div in (("sequence NLL (product)", 1.0), ("per-token NLL (loss / tokens)", n_len)):
        lt = saved[f"s{s}_target"] / div
        lo = saved[f"s{s}_off"] / div
        ln = saved[f"s{s}_on"] / div
        oin, nin = saved[f"s{s}_off_in"], saved[f"s{s}_on_in"]

        def add(name, stat):
            rows.setdefault((scale_name, name), []).append(figures(stat))
        add("loss", -lt[cand])
        for k in (1, 2, 4):
            a = tune_offline_a(lo[:k, pop], oin[:k, pop]) if k >= 2 else 0.3
            add(f"RMIA offline k={k} a=tuned", log_ratio(lt[cand], lo[:k, cand], a))
            add(f"RMIA offline k={k} a=1", log_ratio(lt[cand], lo[:k, cand], 1.0))
            add(f"LiRA offline k={k}", lira_offline(logit_confidence(lt[cand]), logit_confidence(lo[:k, cand])))
            if k >= 2:
                add(f"RMIA online k={k}", log_ratio(lt[cand], ln[:k, cand], None))
                add(f"LiRA online k={k}", lira_online(logit_confidence(lt[cand]), logit_confidence(ln[:k, cand]),
                                                     nin[:k, cand]))
            # the paper's offline experiment: 2k references on halves of the pool, each record its k OUT ones
            if 2 * k <= K:
                so, inm = -ln[:2 * k, cand], nin[:2 * k, cand]
                w = ~inm
                lm = logsumexp(np.where(w, so, -np.inf), axis=0) - np.log(w.sum(0))
                for a in (0.33, 1.0):
                    marg = np.logaddexp(np.log1p(a) + lm, np.log1p(-a) if a < 1 else -np.inf) - np.log(2.0)
                    add(f"RMIA off-from-pool k={k} a={a:g}", -lt[cand] - marg)
                phi_t, phi_r = logit_confidence(lt[cand]), logit_confidence(-so)
                mu = (phi_r * w).sum(0) / w.sum(0)
                add(f"LiRA off-from-pool k={k}", (phi_t - mu) / np.sqrt(np.var(phi_r[w], ddof=1)))
print(f"joint BiLSTM-CRF, {n_shuffles} shuffles of the bench split, mean of AUC, TPR@1%, TPR@0.1%\n")
print("| likelihood | attack | AUC | TPR@1% | TPR@0.1% |\n|---|---|---|---|---|")
for (sc, name), v in rows.items():
    a = np.array(v, dtype=float).mean(0)
    print(f"| {sc} | {name} | {a[0]:.3f} | {a[1]:.3f} | {a[2]:.4f} |")
print(f"total {time.time() - t0:.0f}s")
