"""Helper experiment: find a corpus/R/epochs setting where the undefended joint model leaks a pin
and the §6-defended one (D 0.2 + ES patience 20 + CE) does not. Prints one JSON line per run."""
import argparse, json, time
import torch
torch.set_num_threads(1)
from pytest_privleak.attacks.cea import extract
from pytest_privleak.canaries import canary, inject_canaries
from pytest_privleak.data import generate_snips_like
from pytest_privleak.targets import train_target

ap = argparse.ArgumentParser()
ap.add_argument("--n-train", type=int, default=1500); ap.add_argument("--n-valid", type=int, default=200)
ap.add_argument("--n-test", type=int, default=200); ap.add_argument("--unseen", type=float, default=0.0)
ap.add_argument("--repeats", type=int, default=100); ap.add_argument("--seed", type=int, default=0)
ap.add_argument("--defended", action="store_true"); ap.add_argument("--epochs", type=int, default=None)
ap.add_argument("--trials", type=int, default=10); ap.add_argument("--best-trials", type=int, default=5)
ap.add_argument("--canary-seed", type=int, default=0)
a = ap.parse_args()
pin = canary("pin", 4, seed=a.canary_seed)
data = inject_canaries(generate_snips_like(a.n_train, a.n_valid, a.n_test, seed=a.seed, unseen_share=a.unseen),
                       pin, repeats=a.repeats)
kw = dict(dropout=0.2, early_stopping=True, patience=20, char_embeddings=True) if a.defended else {}
if a.epochs: kw["epochs"] = a.epochs
t0 = time.perf_counter()
m = train_target("joint-bilstm-crf", data, device="cpu", cache=None, seed=a.seed, progress=False, **kw)
train_s = time.perf_counter() - t0
ev = m.evaluate(data.test)
t1 = time.perf_counter()
single = extract(m, pin, method="gradient", trials=a.trials, starts=1, select="single", seed=0)
best = extract(m, pin, method="gradient", trials=a.best_trials, starts=8, select="best_loss", seed=0)
exh = extract(m, pin, method="exhaustive")
h = m.history
vl = [round(r["valid_loss"], 3) for r in h]
out = dict(n_train=a.n_train, unseen=a.unseen, R=a.repeats, seed=a.seed, defended=a.defended, epochs_cap=kw.get("epochs", "default"),
           epochs_run=m.stopped_epoch, best_epoch=m.best_epoch, stopped_early=m.stopped_early,
           intent_acc=round(ev["intent_accuracy"], 3), slot_acc=round(ev["slot_accuracy"], 3),
           single_acc=single.accuracy, single_hdt=round(single.hdt, 3), best8_acc=best.accuracy,
           best8_hdt=round(best.hdt, 3), exh_rank=exh.ranks[0], train_s=round(train_s, 1),
           attack_s=round(time.perf_counter() - t1, 1), valid_curve=vl[::5] + [vl[-1]])
print(json.dumps(out), flush=True)
