"""Issue 18 RMIA audit, step 2: every variant on the saved signals (one thing varied at a time).

/work/venv/bin/python .notes/issue18_rmia_audit_eval.py [.notes/issue18_rmia_audit_signals.npz]
Uses the product's own maths (membership_rmia, membership_lira, membership_figures) on per-record log-probabilities.
"""
import sys
from collections import defaultdict

import numpy as np
from scipy.special import logsumexp

from pytest_privleak.attacks.membership_figures import auc_from_statistics, tpr_at_fpr
from pytest_privleak.attacks.membership_lira import lira_offline, lira_online, logit_confidence
from pytest_privleak.attacks.membership_rmia import A_GRID, log_ratio, rmia_scores, tune_offline_a

path = sys.argv[1] if len(sys.argv) > 1 else ".notes/issue18_rmia_audit_signals.npz"
D = np.load(path)
C, K = int(D["n_corpora"]), int(D["K"])


def signals(comp):
    """comp[..., 3, N] -> dict of log-probability signals (higher = more likely)."""
    ilp, tsum, n = comp[..., 0, :], comp[..., 1, :], comp[..., 2, :]
    return {"adapter (intent + mean tag)": ilp + tsum / n, "joint (intent + sum tag)": ilp + tsum,
            "intent only": ilp, "tags mean": tsum / n}


def figures(stat, m):
    s = np.asarray(stat, dtype=np.float64)
    mem, non = s[:m], s[m:m + 1000]
    return (auc_from_statistics(mem, non), tpr_at_fpr(mem, non, 0.01).tpr, tpr_at_fpr(mem, non, 0.001).tpr)


def rmia_offline_ratio(st, sr, a):
    return log_ratio(-st, -sr, a)


rows = defaultdict(list)   # (signal, attack) -> list of (auc, tpr1, tpr01)
checks = defaultdict(list)
for c in range(C):
    m = int(D[f"c{c}_n_members"])
    cand = slice(0, m + 1000)
    pop = slice(m + 1000, m + 1600)
    popbig = slice(m + 1000, m + 2900)
    T = signals(D[f"c{c}_target"])
    OFF, ON, BIG = (signals(D[f"c{c}_{n}"]) for n in ("off", "on", "offbig"))
    off_in, on_in, big_in = (D[f"c{c}_{n}_in"] for n in ("off", "on", "offbig"))
    for sname in T:
        st = T[sname]
        rows[(sname, "loss")].append(figures(st, m))
        for k in (1, 2, 4, 8):
            sr = OFF[sname][:k]
            # offline a as the product picks it (tuned on the population when k >= 2, else 0.3)
            a_t = tune_offline_a(-sr[:, pop], off_in[:k, pop]) if k >= 2 else 0.3
            r = rmia_offline_ratio(st[cand], sr[:, cand], a_t)
            rows[(sname, f"RMIA off k={k} a=tuned")].append(figures(r, m))
            checks[(sname, f"a tuned k={k}")].append(a_t)
            best = max(A_GRID, key=lambda a: figures(rmia_offline_ratio(st[cand], sr[:, cand], a), m)[1])
            rows[(sname, f"RMIA off k={k} a=oracle(TPR1%)")].append(figures(rmia_offline_ratio(st[cand], sr[:, cand], best), m))
            checks[(sname, f"a oracle k={k}")].append(best)
            rows[(sname, f"RMIA off k={k} a=1")].append(figures(rmia_offline_ratio(st[cand], sr[:, cand], 1.0), m))
            rows[(sname, f"LiRA off k={k}")].append(figures(lira_offline(logit_confidence(-st[cand]), logit_confidence(-sr[:, cand])), m))
            # references on 950 records (offline, larger population)
            sb = BIG[sname][:k]
            a_b = tune_offline_a(-sb[:, popbig], big_in[:k, popbig]) if k >= 2 else 0.3
            rows[(sname, f"RMIA off950 k={k} a=tuned")].append(figures(rmia_offline_ratio(st[cand], sb[:, cand], a_b), m))
            rows[(sname, f"LiRA off950 k={k}")].append(figures(lira_offline(logit_confidence(-st[cand]), logit_confidence(-sb[:, cand])), m))
            if k >= 2:
                so = ON[sname][:k]
                r_on = log_ratio(-st[cand], -so[:, cand], None)
                rows[(sname, f"RMIA on k={k}")].append(figures(r_on, m))
                rows[(sname, f"LiRA on k={k}")].append(figures(
                    lira_online(logit_confidence(-st[cand]), logit_confidence(-so[:, cand]), on_in[:k, cand]), m))
                if sname.startswith("adapter") and k == 4:
                    # tie-break / z / gamma checks on the product signal, online k=4 (z = population, all refs)
                    z_ratio = log_ratio(-st[pop], -so[:, pop], None)
                    for g in (1.0, 2.0):
                        sc = rmia_scores(r_on, z_ratio, g)
                        rows[(sname, f"RMIA on k=4 paper score only (no tie-break) gamma={g:g}")].append(figures(sc.score, m))
                        rows[(sname, f"RMIA on k=4 product ranking gamma={g:g}")].append(figures(sc.ranking(), m))
        if sname.startswith("adapter"):
            # offline k=4: z ratios with all refs (product) vs OUT-only refs for z (authors' code), score only
            k = 4
            sr = OFF[sname][:k]
            a_t = tune_offline_a(-sr[:, pop], off_in[:k, pop])
            r = rmia_offline_ratio(st[cand], sr[:, cand], a_t)
            z_all = rmia_offline_ratio(st[pop], sr[:, pop], a_t)
            # OUT-only marginal for z: mean of exp over refs not trained on z
            p = np.exp(sr[:, pop]); w = ~off_in[:k, pop]
            pout = (p * w).sum(0) / np.maximum(w.sum(0), 1)
            z_out = st[pop] - np.log(((1 + a_t) * pout + (1 - a_t)) / 2)
            for zname, z in (("z scored with all refs (product)", z_all), ("z scored with OUT refs only (authors)", z_out)):
                sc = rmia_scores(r, z, 2.0)
                rows[(sname, f"RMIA off k=4 {zname}, score only")].append(figures(sc.score, m))
                rows[(sname, f"RMIA off k=4 {zname}, product ranking")].append(figures(sc.ranking(), m))
            same = np.array_equal(np.argsort(rmia_scores(r, z_all, 2.0).ranking(), kind="stable"),
                                  np.argsort(r, kind="stable"))
            checks[("adapter", "product ranking order == ratio order (offline k=4)")].append(same)

# ---- the likelihood's scale: Pr(x|theta) = exp(-loss / T) (the authors' code softens with a temperature) ----
for c in range(C):
    m = int(D[f"c{c}_n_members"])
    cand = slice(0, m + 1000)
    pop = slice(m + 1000, m + 1600)
    T = signals(D[f"c{c}_target"])
    OFF, ON = (signals(D[f"c{c}_{n}"]) for n in ("off", "on"))
    off_in, on_in = (D[f"c{c}_{n}_in"] for n in ("off", "on"))
    for sname in ("adapter (intent + mean tag)", "joint (intent + sum tag)"):
        st = T[sname]
        for temp in (0.5, 1.0, 2.0, 4.0, 16.0):
            for k in (1, 2, 4):
                sr = OFF[sname][:k] / temp
                a_t = tune_offline_a(-sr[:, pop], off_in[:k, pop]) if k >= 2 else 0.3
                rows[(sname, f"T={temp:g} RMIA off k={k} a=tuned")].append(figures(rmia_offline_ratio(st[cand] / temp, sr[:, cand], a_t), m))
                checks[(sname, f"T={temp:g} a tuned k={k}")].append(a_t)
                if k >= 2:
                    so = ON[sname][:k] / temp
                    rows[(sname, f"T={temp:g} RMIA on k={k}")].append(figures(log_ratio(-st[cand] / temp, -so[:, cand], None), m))
        for k in (1, 2, 4):
            sr = OFF[sname][:k]
            rows[(sname, f"mean-loss reference (T=inf) off k={k}")].append(figures(st[cand] - sr[:, cand].mean(0), m))
            if k >= 2:
                so = ON[sname][:k]
                rows[(sname, f"mean-loss reference (T=inf) on k={k}")].append(figures(st[cand] - so[:, cand].mean(0), m))
                rows[(sname, f"LiRA on k={k} statistic -loss")].append(figures(lira_online(st[cand], so[:, cand], on_in[:k, cand]), m))
            rows[(sname, f"LiRA off k={k} statistic -loss")].append(figures(lira_offline(st[cand], sr[:, cand]), m))

# ---- the paper's offline experiments: 2k references on halves of the whole pool (candidates included), each record
# scored with the k references NOT trained on it (ml_privacy_meter research/2023_rmia: offline = out_signals) ----
def out_only_logmean(sr, inm):
    w = ~inm
    return logsumexp(np.where(w, sr, -np.inf), axis=0) - np.log(w.sum(0))


for c in range(C):
    m = int(D[f"c{c}_n_members"])
    cand = slice(0, m + 1000)
    T = signals(D[f"c{c}_target"])
    ON = signals(D[f"c{c}_on"])
    on_in = D[f"c{c}_on_in"]
    for sname in ("adapter (intent + mean tag)", "joint (intent + sum tag)"):
        st = T[sname][cand]
        for k in (1, 2, 4):
            so, inm = ON[sname][:2 * k][:, cand], on_in[:2 * k][:, cand]
            lm = out_only_logmean(so, inm)
            for a in (0.0, 0.33, 1.0):
                marg = np.logaddexp(np.log1p(a) + lm, np.log1p(-a) if a < 1 else -np.inf) - np.log(2.0)
                rows[(sname, f"RMIA off-from-pool k={k} a={a:g}")].append(figures(st - marg, m))
            phi_t, phi_r = logit_confidence(-st), logit_confidence(-so)
            w = ~inm
            mu = (phi_r * w).sum(0) / w.sum(0)
            var = np.var(phi_r[w], ddof=1) if w.sum() > 1 else 1.0
            rows[(sname, f"LiRA off-from-pool k={k}")].append(figures((phi_t - mu) / np.sqrt(var), m))

print(f"{C} corpora; mean over corpora of AUC, TPR@1%FPR, TPR@0.1%FPR\n")
print("| signal | attack | AUC | TPR@1% | TPR@0.1% |\n|---|---|---|---|---|")
for (sname, attack), v in rows.items():
    a = np.array(v, dtype=float).mean(0)
    print(f"| {sname} | {attack} | {a[0]:.3f} | {a[1]:.3f} | {a[2]:.4f} |")
print()
for key, v in checks.items():
    print(key, v)
