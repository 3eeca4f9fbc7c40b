"""Experiment: exhaustive rank of each of six pins in each of the six slow-test models (cache of a
slow-test run): the injected pin (diagonal) against pins the model never saw (counterfactual)."""
import numpy as np, torch
torch.set_num_threads(1)
from pytest_privleak.attacks.cea import extract
from pytest_privleak.cache import TargetCache
from pytest_privleak.canaries import canary, inject_canaries
from pytest_privleak.data import generate_snips_like
from pytest_privleak.targets import train_target
cache = TargetCache("/tmp/pytest-of-root/pytest-61/cea-targets0")
REALISTIC = dict(n_train=1500, n_valid=200, n_test=200, seed=0, unseen_share=0.5)
DEFENCES = dict(epochs=100, dropout=0.2, early_stopping=True, patience=20, char_embeddings=True)
pins = [canary("pin", seed=s) for s in range(6)]
for label, kw in (("defended", DEFENCES), ("undefended", {})):
    ranks = np.zeros((6, 6), dtype=int)
    for i, pin in enumerate(pins):
        data = inject_canaries(generate_snips_like(**REALISTIC), pin, repeats=1)
        m = train_target("joint-bilstm-crf", data, device="cpu", cache=cache, seed=0, progress=False, **kw)
        ranks[i] = extract(m, pins, method="exhaustive").ranks
    diag = np.diag(ranks); off = ranks[~np.eye(6, dtype=bool)]
    print(label, "rank of the injected pin", diag.tolist(), "median", np.median(diag),
          "| rank of the other 5 pins in the same models: median", np.median(off), "min", off.min())
