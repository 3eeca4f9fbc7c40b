"""Prototype: the <unk> row as the mean of the rare training words' rows (issue 21), then evaluate."""
import json, sys, time
from collections import Counter
import torch
torch.set_num_threads(1)
from pytest_privleak.canaries import canary, inject_canaries
from pytest_privleak.data import generate_snips_like
from pytest_privleak.targets import train_target
from pytest_privleak.targets.vocab import UNK_ID, training_counts
from pytest_privleak.targets.unk_training import tie_untrained_rows


def rare_ids(vocab, utterances, share):
    counts = training_counts(utterances)
    ordered = sorted(counts.values())
    cut = max(ordered[min(len(ordered) - 1, int(share * len(ordered)))], 1)
    # at most `cut` occurrences where cut is the count of the share-quantile type
    return vocab.token_ids(sorted(t for t, n in counts.items() if n <= cut), strict=True), cut


data = generate_snips_like(n_train=1500, n_valid=200, n_test=200, seed=3, unseen_share=0.5)
data = inject_canaries(data, canary("pin", seed=21), repeats=10)
model = train_target("joint-bilstm-crf", data, device="cpu", cache=None, seed=0, progress=False, unk_alpha=0.0)
print("alpha0 random unk", model.evaluate(list(data.test)), model.evaluate(list(data.valid)))
W = model.net.word_embedding.weight
orig = W.detach().clone()
for share in (0.0, 0.1, 0.25, 0.5, 1.0):
    ids, cut = rare_ids(model.vocab, data.train, share)
    with torch.no_grad():
        W[UNK_ID] = orig[ids].mean(0)
        tie_untrained_rows(W, model.vocab)
    print("share", share, "cut", cut, "n", len(ids), model.evaluate(list(data.test)), model.evaluate(list(data.valid)))
with torch.no_grad():
    W[UNK_ID] = 0
print("zero row", model.evaluate(list(data.test)))
