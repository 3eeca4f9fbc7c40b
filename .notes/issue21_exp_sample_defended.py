"""Issue 21: the sample project's 'pin said once, paper defences' model with the new default (no word dropout)."""
import json, sys, time
import torch
torch.set_num_threads(1)
from pytest_privleak.attacks.cea import extract
from pytest_privleak.canaries import canary, inject_canaries
from pytest_privleak.data import generate_snips_like
from pytest_privleak.targets import train_target

alpha = float(sys.argv[1])
pin = canary("pin", length=4)
corpus = generate_snips_like(n_train=1500, n_valid=200, n_test=200, seed=0, unseen_share=0.5)
data = inject_canaries(corpus, pin, repeats=1)
t0 = time.time()
model = train_target("joint-bilstm-crf", data, device="cpu", cache=None, seed=0, progress=False, unk_alpha=alpha,
                     dropout=0.2, early_stopping=True, patience=20, char_embeddings=True, epochs=100)
rep = extract(model, pin, method="exhaustive", budget=None)
print(json.dumps({"pin": pin.text, "unk_alpha": alpha, "rank": rep.ranks[0], "stopped": model.stopped_epoch,
                  "best": model.best_epoch, "s": round(time.time() - t0)}), flush=True)
