"""Issue 18 RMIA audit, step 4b: online RMIA vs LiRA with references of the target's size (300) vs the product's (950).

/work/venv/bin/python .notes/issue18_rmia_audit_eval_matched.py
Candidates: the 300 members and the first 300 non-members (the only non-members the matched references have an
in/out split for); the 950-record references are the product's online ones from issue18_rmia_audit_signals.npz,
evaluated on the same candidates. TPR at 1 % FPR over 300 non-members (3 false positives allowed).
"""
import sys

import numpy as np
from scipy.special import logsumexp

from pytest_privleak.attacks.membership_figures import auc_from_statistics, tpr_at_fpr
from pytest_privleak.attacks.membership_lira import lira_online, logit_confidence
from pytest_privleak.attacks.membership_rmia import log_ratio

folder = sys.argv[1] if len(sys.argv) > 1 else ".notes"
A = np.load(f"{folder}/issue18_rmia_audit_signals.npz")
M = np.load(f"{folder}/issue18_rmia_audit_signals_matched.npz")
C = min(int(A["n_corpora"]), int(M["n_corpora"]))


def sig(comp, name):
    ilp, tsum, n = comp[..., 0, :], comp[..., 1, :], comp[..., 2, :]
    return {"adapter": ilp + tsum / n, "joint": ilp + tsum}[name]


def figures(stat, m):
    s = np.asarray(stat, dtype=np.float64)
    return auc_from_statistics(s[:m], s[m:m + 300]), tpr_at_fpr(s[:m], s[m:m + 300], 0.01).tpr


rows = {}
for c in range(C):
    m = int(M[f"c{c}_n_members"])
    assert int(A[f"c{c}_n_members"]) == m
    cand = slice(0, m + 300)
    assert np.allclose(A[f"c{c}_target"][:, cand], M[f"c{c}_target"][:, cand]), "targets differ"
    for name in ("adapter", "joint"):
        st = sig(M[f"c{c}_target"], name)[cand]
        rows.setdefault((name, "loss", "-"), []).append(figures(st, m))
        for refs, key in (("950 (product pool)", "on"), ("300 (target's size)", "onm")):
            src = A if key == "on" else M
            sr, inm = sig(src[f"c{c}_{key}"], name)[:, cand], src[f"c{c}_{key}_in"][:, cand]
            for k in (2, 4, 8):
                rows.setdefault((name, f"RMIA online k={k}", refs), []).append(figures(log_ratio(-st, -sr[:k], None), m))
                rows.setdefault((name, f"LiRA online k={k}", refs), []).append(
                    figures(lira_online(logit_confidence(-st), logit_confidence(-sr[:k]), inm[:k]), m))
print(f"{C} corpora, 300 members vs 300 non-members, mean AUC and TPR@1%FPR\n")
print("| signal | attack | references train on | AUC | TPR@1% (± s.e. over corpora) |\n|---|---|---|---|---|")
for (name, attack, refs), v in sorted(rows.items(), key=lambda kv: (kv[0][0], kv[0][1][5:], kv[0][1], kv[0][2])):
    v = np.array(v, dtype=float)
    a, se = v.mean(0), v.std(0, ddof=1) / np.sqrt(len(v))
    print(f"| {name} | {attack} | {refs} | {a[0]:.3f} | {a[1]:.3f} ± {se[1]:.3f} |")
print("\npaired per corpus, TPR@1%: RMIA online - LiRA online (mean ± s.e.; wins of RMIA / corpora)\n")
print("| signal | references train on | k | RMIA - LiRA | RMIA wins |\n|---|---|---|---|---|")
for name in ("adapter", "joint"):
    for refs in ("300 (target's size)", "950 (product pool)"):
        for k in (2, 4, 8):
            d = np.array(rows[(name, f"RMIA online k={k}", refs)])[:, 1] - np.array(rows[(name, f"LiRA online k={k}", refs)])[:, 1]
            print(f"| {name} | {refs} | {k} | {d.mean():+.3f} ± {d.std(ddof=1) / np.sqrt(len(d)):.3f} | "
                  f"{int((d > 0).sum())} (ties {int((d == 0).sum())}) / {len(d)} |")

# the paper's offline experiment with references of the target's size: 2k references on halves of the 600-record pool,
# each record scored with its k OUT references only (offline formula with a), LiRA offline likewise
off = {}
for c in range(C):
    m = int(M[f"c{c}_n_members"])
    cand = slice(0, m + 300)
    for name in ("adapter", "joint"):
        st = sig(M[f"c{c}_target"], name)[cand]
        for k in (1, 2, 4):
            sr, inm = sig(M[f"c{c}_onm"], name)[:2 * k, cand], M[f"c{c}_onm_in"][:2 * k, cand]
            w = ~inm
            lm = logsumexp(np.where(w, sr, -np.inf), axis=0) - np.log(w.sum(0))
            for a in (0.0, 0.33, 1.0):
                marg = np.logaddexp(np.log1p(a) + lm, np.log1p(-a) if a < 1 else -np.inf) - np.log(2.0)
                off.setdefault((name, k, f"RMIA a={a:g}"), []).append(figures(st - marg, m))
            phi_t, phi_r = logit_confidence(-st), logit_confidence(-sr)
            mu = (phi_r * w).sum(0) / w.sum(0)
            off.setdefault((name, k, "LiRA"), []).append(figures((phi_t - mu) / np.sqrt(np.var(phi_r[w], ddof=1)), m))
print("\noffline from the shared pool, references of the target's size (2k trained, k OUT per record), TPR@1% ± s.e.\n")
print("| signal | k | LiRA offline | RMIA a=0 | RMIA a=0.33 | RMIA a=1 |\n|---|---|---|---|---|---|")
for name in ("adapter", "joint"):
    for k in (1, 2, 4):
        cells = []
        for col in ("LiRA", "RMIA a=0", "RMIA a=0.33", "RMIA a=1"):
            v = np.array(off[(name, k, col)], dtype=float)[:, 1]
            cells.append(f"{v.mean():.3f} ± {v.std(ddof=1) / np.sqrt(len(v)):.3f}")
        print(f"| {name} | {k} | " + " | ".join(cells) + " |")
