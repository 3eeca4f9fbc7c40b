"""Issue 18 RMIA audit, step 3: why do out-references calibrate this target so poorly? (diagnostics on saved signals)

/work/venv/bin/python .notes/issue18_rmia_audit_diag.py [signals.npz]
- how well the references' loss predicts the target's loss on records none of them trained on (non-members), against
  how well they predict one another's on such records (Spearman);
- how much of a member's advantage the loss attack sees vs the calibrated one (a per-record "difficulty" that the
  references share with the target would be removed by calibration and raise the AUC).
"""
import sys

import numpy as np
from scipy.stats import spearmanr

path = sys.argv[1] if len(sys.argv) > 1 else ".notes/issue18_rmia_audit_signals.npz"
D = np.load(path)
C, K = int(D["n_corpora"]), int(D["K"])
res = []
for c in range(C):
    m = int(D[f"c{c}_n_members"])
    t = D[f"c{c}_target"]
    loss_t = -(t[0] + t[1] / t[2])
    r = D[f"c{c}_off"]
    loss_r = -(r[:, 0] + r[:, 1] / r[:, 2])          # [K, N]
    non = slice(m, m + 1000)
    mem = slice(0, m)
    # target vs mean of refs on non-members (no model trained on them)
    rho_t = spearmanr(loss_t[non], loss_r[:, non].mean(0)).statistic
    # ref 0 vs mean of refs 1..K-1 on the same non-members
    rho_r = np.mean([spearmanr(loss_r[j, non], np.delete(loss_r[:, non], j, 0).mean(0)).statistic for j in range(K)])
    # ref j vs ref i pairwise, and target vs ref j pairwise
    pair_rr = np.mean([spearmanr(loss_r[i, non], loss_r[j, non]).statistic for i in range(K) for j in range(i + 1, K)])
    pair_tr = np.mean([spearmanr(loss_t[non], loss_r[j, non]).statistic for j in range(K)])
    # same on members (target trained on them, refs not)
    rho_m = spearmanr(loss_t[mem], loss_r[:, mem].mean(0)).statistic
    # online references (halves of candidates + population, ~150 of the target's 300 records each): each non-member
    # scored by the references NOT trained on it
    o = D[f"c{c}_on"]
    loss_o = -(o[:, 0] + o[:, 1] / o[:, 2])
    w = ~D[f"c{c}_on_in"]
    out_mean = (loss_o * w).sum(0) / w.sum(0)
    rho_pool = spearmanr(loss_t[non], out_mean[non]).statistic
    # loss scale
    res.append((rho_t, rho_r, pair_tr, pair_rr, rho_m, rho_pool, np.median(loss_t[mem]), np.median(loss_t[non]),
                np.median(loss_r[:, non]), np.median(loss_r[:, mem])))
a = np.array(res)
names = ["Spearman(target, mean of K refs) on non-members", "Spearman(ref j, mean of other K-1 refs) on non-members",
         "Spearman(target, one ref) on non-members, mean over refs", "Spearman(ref i, ref j) on non-members, mean over pairs",
         "Spearman(target, mean of K refs) on members",
         "Spearman(target, mean of its OUT online refs (trained on 950 incl. ~150 of the target's records)) on non-members", "median target loss, members", "median target loss, non-members",
         "median ref loss, non-members", "median ref loss, members"]
print(f"{C} corpora, offline references K={K} (loss = intent CE + mean tag CE)\n")
print("| quantity | mean over corpora | min | max |\n|---|---|---|---|")
for i, n in enumerate(names):
    print(f"| {n} | {a[:, i].mean():.3f} | {a[:, i].min():.3f} | {a[:, i].max():.3f} |")
