"""Issue 18 RMIA audit, step 1: train the sample project's GRU target and its references, save per-record signals.

Run from /work/main/sample_project:  /work/venv/bin/python ../.notes/issue18_rmia_audit_collect.py [n_corpora]
Same setting as .notes/issue18_own_gru_methods.py (corpus seeds 3.., 300 train, 12 epochs, 1000 non-members,
600 population records). References are trained exactly as train_references does (halves of the pool; offline pool =
population, online pool = candidates + population, complementary pairs, seeds seed*1000+j+1) but directly with the
team's `train`, so that per-record *component* log-probabilities (intent, per-token tags) can be read out, not only
the adapter's loss. Extra: offline references trained on 950 records (the online references' size) from a larger
population, to separate "online" from "references trained on 3x the target's records".
Output: .notes/issue18_rmia_audit_signals.npz
"""
import sys, time
import numpy as np
import torch

torch.set_num_threads(1)
sys.path.insert(0, ".")
from intent_model.model import IntentSlotGRU, Labels  # noqa: E402
from intent_model.train import train, _batch  # noqa: E402
from pytest_privleak.data import generate_snips_like  # noqa: E402
from pytest_privleak.attacks.membership_references import half_masks  # noqa: E402


@torch.no_grad()
def components(model, utts):
    """per record: log p(true intent), sum of log p(true tag), number of tokens."""
    ids, mask, intents, tags = _batch(model, list(utts))
    il, tl = model.forward_embeddings(model.embedding(ids), mask)
    ilp = torch.log_softmax(il, -1).gather(1, intents[:, None])[:, 0]
    tlp = torch.log_softmax(tl, -1).gather(2, tags[:, :, None])[:, :, 0]
    return ilp.numpy().astype(np.float64), (tlp * mask).sum(1).numpy().astype(np.float64), mask.sum(1).numpy()


def fit(corpus, split, seed):
    return train(corpus.replace(train=tuple(split)), epochs=12, seed=seed)


n_corpora = int(sys.argv[1]) if len(sys.argv) > 1 else 4
# "fixedvocab": a diagnostic, not the team's recipe: every model (target and references) gets the word vocabulary
# of the whole corpus, so no record is out-of-vocabulary for one model and in-vocabulary for another
mode = sys.argv[2] if len(sys.argv) > 2 else "team"
if mode == "fixedvocab":
    import intent_model.train as team_train

    class FixedLabels:
        full = None

        @classmethod
        def from_utterances(cls, utterances):
            return cls.full
    team_train.Labels = FixedLabels
K = 8
out = {}
t0 = time.time()
for c in range(n_corpora):
    corpus = generate_snips_like(n_train=300, n_valid=4500, n_test=1200, seed=c + 3)
    members = list(dict.fromkeys(corpus.train))
    rec = [u for u in dict.fromkeys([*corpus.test, *corpus.valid]) if u not in set(members)]
    non, pop, pop_big = rec[:1000], rec[1200:1800], rec[1200:3100]
    assert len(pop_big) == 1900, len(pop_big)
    out[f"c{c}_n_members"] = len(members)
    everything = members + non + pop_big          # columns: 300 members, 1000 non, 1900 (first 600 = pop)
    if mode == "fixedvocab":
        FixedLabels.full = Labels.from_utterances([*corpus.train, *corpus.valid, *corpus.test])
    target = train(corpus, epochs=12, seed=c)
    sig = {"target": components(target, everything)}
    # offline: pool = pop (600), refs on 300 ; online: pool = members + non + pop (1900), refs on 950
    rng = np.random.default_rng(0)
    off_mask = half_masks(600, K, rng, complementary=False)
    rng = np.random.default_rng(0)
    on_mask = half_masks(len(members) + 1600, K, rng, complementary=True)
    rng = np.random.default_rng(1)
    big_mask = half_masks(1900, K, rng, complementary=False)   # offline, pop_big, refs on 950
    for name, pool, masks in (("off", pop, off_mask), ("on", members + non + pop, on_mask), ("offbig", pop_big, big_mask)):
        rows = []
        for j in range(K):
            split = [u for u, m in zip(pool, masks[j]) if m]
            rows.append(components(fit(corpus, split, seed=1000 * 0 + j + 1 + (100 if name == "offbig" else 0)), everything))
        sig[name] = rows
        # in-mask over `everything` columns
        full = np.zeros((K, len(everything)), dtype=bool)
        index = {u: i for i, u in enumerate(everything)}
        cols = np.array([index[u] for u in pool])
        full[:, cols] = masks
        out[f"c{c}_{name}_in"] = full
    for key in ("target",):
        out[f"c{c}_target"] = np.stack(sig[key])
    for name in ("off", "on", "offbig"):
        out[f"c{c}_{name}"] = np.stack([np.stack(r) for r in sig[name]])   # [K, 3, N]
    print(f"corpus {c} done {time.time() - t0:.0f}s", flush=True)
np.savez("../.notes/issue18_rmia_audit_signals" + ("" if mode == "team" else "_" + mode) + ".npz", n_corpora=n_corpora, K=K, **out)
print("saved", time.time() - t0)
