"""Experiment (issue 12): where the paper's single-start relaxed attack (§3.1, eq. 1-3, App. B) ends, against the
discrete loss landscape, on a model cached by exp_single_start_unk.py (same argv: pin seed, R, key=value config).

Per trial (10 random starts, the seeds select="single" uses): the relaxed loss at the final soft input
softmax(Z / T_final) W_V0, the discrete loss of its argmax, the truth's discrete loss, and the smallest
per-position max probability of the final softmax (1.0 = one-hot). Then the same attack started AT the truth
(logits init_scale * one-hot of the true digits): whether the truth is a fixed point of the relaxation.
One torch thread. Prints one JSON line.
"""
import json
import os
import sys

import torch

torch.set_num_threads(1)
from pytest_privleak.attacks.candidates import canary_rows, discrete_loss  # noqa: E402
from pytest_privleak.attacks.cea import CEAConfig, _Rows, initial_logits, relaxed_attack, row_seed  # noqa: E402
from pytest_privleak.cache import TargetCache  # noqa: E402
from pytest_privleak.canaries import canary, inject_canaries  # noqa: E402
from pytest_privleak.data import generate_snips_like  # noqa: E402
from pytest_privleak.targets import train_target  # noqa: E402

cs, R = int(sys.argv[1]), int(sys.argv[2])
kw = {}
for arg in sys.argv[3:]:
    k, v = arg.split("=")
    kw[k] = bool(int(v)) if k in ("char_embeddings", "early_stopping") else (int(v) if k == "epochs" else float(v))
pin = canary("pin", 4, seed=cs)
data = inject_canaries(generate_snips_like(1500, 200, 200, seed=0, unseen_share=0.5), pin, repeats=R)
m = train_target("joint-bilstm-crf", data, cache=TargetCache(os.environ.get("SS_CACHE", "/tmp/ss_cache")), seed=0,
                 progress=False, **kw)
assert m.loaded_from_cache, "train it first with exp_single_start_unk.py"
config = CEAConfig(starts=1, select="single")
W = m.input_embeddings()
prefix, v0 = canary_rows(m, pin)
trials = 10
rows = _Rows(prefix.expand(trials, -1), v0, [pin.intent] * trials, [pin.tags] * trials)
t_final = config.temperature0 * config.temperature_decay ** (config.epochs - 1)
truth = torch.tensor(pin.secret_indices)


def run(start):
    z = relaxed_attack(m, rows, start, config)
    soft = torch.softmax(z / t_final, dim=-1)
    with torch.no_grad():
        relaxed = m.loss_from_embeddings(torch.cat([W[prefix].expand(trials, -1, -1), soft @ W[v0]], 1),
                                         pin.intent, pin.tags)
    guess = z.argmax(-1)
    return dict(relaxed_loss=[round(float(x), 3) for x in relaxed],
                guess_loss=[round(float(x), 3) for x in discrete_loss(m, W, prefix, v0, guess, [pin.intent],
                                                                      [pin.tags])],
                min_max_prob=[round(float(x), 3) for x in soft.max(-1).values.min(-1).values],
                hamming=[int((g != truth).sum()) for g in guess])


random_start = initial_logits([row_seed(0, 0, t) for t in range(trials)], 1, 4, len(v0), config.init_scale)
at_truth = torch.nn.functional.one_hot(truth, len(v0)).float().expand(trials, -1, -1) * config.init_scale
true_loss = float(discrete_loss(m, W, prefix, v0, truth.unsqueeze(0), [pin.intent], [pin.tags])[0])
print(json.dumps(dict(pin=" ".join(pin.secret), R=R, kw=kw, true_loss=round(true_loss, 3),
                      random_start=run(random_start), start_at_truth=run(at_truth.contiguous()))), flush=True)
