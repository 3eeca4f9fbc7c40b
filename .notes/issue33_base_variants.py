import sys, time, random, warnings, torch, numpy as np
from pytest_privleak.data.synthetic import generate_snips_like
from pytest_privleak.targets import train_target
from pytest_privleak.cache.targets import TargetCache
from pytest_privleak.attacks.membership.figures import auc_from_statistics, tpr_at_fpr
torch.set_num_threads(1); warnings.simplefilter("ignore")
n_train, n_test = int(sys.argv[1]), int(sys.argv[2])
corpus = generate_snips_like(n_train=4000, n_valid=200, n_test=200, seed=3, unseen_share=0.5)
pool = list(dict.fromkeys(corpus.train)); random.Random(0).shuffle(pool)
members, non = pool[:n_train], pool[n_train:n_train+n_test]
data = corpus.replace(train=tuple(members), test=tuple(non))
target = train_target("causal-lm", data, cache=TargetCache("/work/scratch/membership/cache"), progress=False, **eval(sys.argv[3] if len(sys.argv)>3 else "{}"))
base = target.base_reference()
recs = members + non
T = target.token_predictions(recs); B = base.token_predictions(recs)
def variants(t, b):
    (lt, ht), (lb, hb) = t, b
    d = lt - lb; err = ~ht
    out = {}
    z = d[err]
    up, dn = z[z>0].sum(), -z[z<0].sum()
    out["paper"] = (up/dn if dn > 0 else 0.0) if err.sum() >= 2 else 0.0
    out["shift"] = d.sum()
    out["loss"] = lt.sum()
    out["errfrac"] = -err.mean()
    out["ez_errmean"] = z.mean() if err.any() else d.mean()
    zz = z if err.sum() >= 2 else d
    u2, d2 = zz[zz>0].sum(), -zz[zz<0].sum()
    out["mine"] = np.log(u2+1e-300) - np.log(d2+1e-300)
    return out
rows = [variants(t, b) for t, b in zip(T, B)]
n = len(members)
for key in rows[0]:
    v = np.array([r[key] for r in rows])
    print(key, round(auc_from_statistics(v[:n], v[n:]),3), [round(tpr_at_fpr(v[:n], v[n:], f).tpr or -1, 3) for f in (0.001, 0.01)])
errs = np.array([(~h).sum() for _, h in T]); print("error positions: members mean", errs[:n].mean(), "non", errs[n:].mean(), "members with <2", (errs[:n]<2).mean(), "non <2", (errs[n:]<2).mean())
