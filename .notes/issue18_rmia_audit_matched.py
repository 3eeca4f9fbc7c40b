"""Issue 18 RMIA audit, step 4: online references trained on as many records as the target (the papers' setting).

Run from /work/main/sample_project:  /work/venv/bin/python ../.notes/issue18_rmia_audit_matched.py [n_corpora]
The same corpora and targets as issue18_rmia_audit_collect.py (corpus seed c + 3, target seed c). The online pool is
the 300 members + the first 300 non-members, so each reference trains on a complementary half of 300 records, the
target's size, and each candidate is in exactly half of them (Carlini et al. 2022 §IV, Zarifzadeh et al. 2024 §5:
target and references are random halves of one pool). The product's online pool (candidates + population, 1900
records) trains each reference on 950. Output: .notes/issue18_rmia_audit_signals_matched.npz
"""
import sys
import time

import numpy as np
import torch

torch.set_num_threads(1)
sys.path.insert(0, ".")
from intent_model.train import train, _batch  # noqa: E402
from pytest_privleak.data import generate_snips_like  # noqa: E402
from pytest_privleak.attacks.membership_references import half_masks  # noqa: E402


@torch.no_grad()
def components(model, utts):
    ids, mask, intents, tags = _batch(model, list(utts))
    il, tl = model.forward_embeddings(model.embedding(ids), mask)
    ilp = torch.log_softmax(il, -1).gather(1, intents[:, None])[:, 0]
    tlp = torch.log_softmax(tl, -1).gather(2, tags[:, :, None])[:, :, 0]
    return ilp.numpy().astype(np.float64), (tlp * mask).sum(1).numpy().astype(np.float64), mask.sum(1).numpy()


n_corpora = int(sys.argv[1]) if len(sys.argv) > 1 else 8
K = 8
out = {}
t0 = time.time()
for c in range(n_corpora):
    corpus = generate_snips_like(n_train=300, n_valid=4500, n_test=1200, seed=c + 3)
    members = list(dict.fromkeys(corpus.train))
    rec = [u for u in dict.fromkeys([*corpus.test, *corpus.valid]) if u not in set(members)]
    non = rec[:300]
    everything = members + rec[:1000]
    pool = members + non
    masks = half_masks(len(pool), K, np.random.default_rng(0), complementary=True)
    out[f"c{c}_n_members"] = len(members)
    out[f"c{c}_target"] = np.stack(components(train(corpus, epochs=12, seed=c), everything))
    rows = []
    for j in range(K):
        split = tuple(u for u, m in zip(pool, masks[j]) if m)
        rows.append(np.stack(components(train(corpus.replace(train=split), epochs=12, seed=j + 1), everything)))
    out[f"c{c}_onm"] = np.stack(rows)
    full = np.zeros((K, len(everything)), dtype=bool)
    full[:, :len(pool)] = masks
    out[f"c{c}_onm_in"] = full
    print(f"corpus {c} done {time.time() - t0:.0f}s", flush=True)
np.savez("../.notes/issue18_rmia_audit_signals_matched.npz", n_corpora=n_corpora, K=K, **out)
print("saved")
