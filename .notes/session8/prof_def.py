import time, sys, torch
torch.set_num_threads(1) if len(sys.argv) > 2 else None
from pytest_privleak.canaries import canary, inject_canaries
from pytest_privleak.data import generate_snips_like
from pytest_privleak.targets import train_targets
from pytest_privleak.attacks.cea.attack import extract
k = int(sys.argv[1])
pin = canary("pin", length=4)
corpus = generate_snips_like(n_train=1500, n_valid=200, n_test=200, seed=0, unseen_share=0.5)
ds = inject_canaries(corpus, pin, repeats=1)
DEF = dict(dropout=0.2, early_stopping=True, patience=20, char_embeddings=True, epochs=100)
t = time.perf_counter()
models = train_targets("joint-bilstm-crf", [(ds, s) for s in range(k)], progress=False, **DEF)
tt = time.perf_counter() - t
print("train", k, round(tt, 1))
for m in models:
    h = m.training_history
    print(" stopped", h.stopped_epoch, h.best_epoch, round(h.epochs[-1]["seconds"],3), round(h.epochs[0]["seconds"],3))
t = time.perf_counter()
r = extract(models[0], pin)
print("cea one model", round(time.perf_counter() - t, 1))
