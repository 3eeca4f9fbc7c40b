"""Experiment: one pin said once, defended or not (argv: pin seed, R, d|u, key=value overrides incl. n_train);
prints HDT of the single-start attack against the pin and against 500 random pins (the guesses' chance HDT)."""
import json, sys, time, numpy as np, torch
torch.set_num_threads(1)
from pytest_privleak.attacks.cea import extract
from pytest_privleak.canaries import canary, inject_canaries
from pytest_privleak.data import generate_snips_like
from pytest_privleak.targets import train_target
cs = int(sys.argv[1]); R = int(sys.argv[2]); defended = sys.argv[3] == "d"
extra = dict(a.split("=") for a in sys.argv[4:]); n_train = int(extra.pop("n_train", 1500))
pin = canary("pin", 4, seed=cs)
data = inject_canaries(generate_snips_like(n_train, 200, 200, seed=0, unseen_share=0.5), pin, repeats=R)
kw = dict(dropout=0.2, early_stopping=True, patience=20, char_embeddings=True, epochs=100) if defended else {}
for k, v in extra.items(): kw[k] = type(kw.get(k, 1.0))(float(v)) if k != "epochs" else int(v)
t = time.perf_counter()
m = train_target("joint-bilstm-crf", data, device="cpu", cache=None, seed=0, progress=False, **kw)
ts = time.perf_counter() - t
single = extract(m, pin, method="gradient", trials=10, starts=1, select="single", seed=0)
best = extract(m, pin, trials=3, starts=8, seed=0)
exh = extract(m, pin, method="exhaustive")
rng = np.random.default_rng(1)
others = rng.integers(0, 10, size=(500, 4)).astype(str)
rec = np.array([list(r) for r in single.reconstructed])
ctrl = float(np.mean([(rec != o).mean() for o in others]))
print(json.dumps(dict(cs=cs, secret=" ".join(pin.secret), R=R, defended=defended, kw=extra, n_train=n_train, train_s=round(ts,1),
    stopped=getattr(m, "stopped_epoch", None), best_epoch=getattr(m, "best_epoch", None),
    single_hdt=round(single.hdt, 3), single_acc=single.accuracy, ctrl_hdt=round(ctrl, 3),
    rec=[" ".join(r) for r in single.reconstructed], best_acc=best.accuracy, best_hdt=round(best.hdt,3), exh_rank=exh.ranks[0])), flush=True)
