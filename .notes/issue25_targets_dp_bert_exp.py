"""Issue 25 item 4: the tiny-BERT intent classifier with and without DP-SGD: membership AUC (loss attack),
Mix And Match rank of contradicting canaries said 10 times, intent accuracy. Same data, seed, config.

Run: /work/venv/bin/python .notes/issue25_targets_dp_bert_exp.py EPS [EPS ...]
"""
import sys
import time

import torch

torch.set_num_threads(1)
from pytest_privleak.attacks.membership_assertion import measure_membership
from pytest_privleak.attacks.mix_and_match_canaries import contradicting_canaries, inject_mask_canaries
from pytest_privleak.cache.targets import TargetCache
from pytest_privleak.data.synthetic import generate_snips_like
from pytest_privleak.targets import train_target

THINGS = ("towels", "lamp", "piano", "wallet", "camera")
INTENTS = ("AddToPlaylist", "BookRestaurant", "GetWeather", "PlayMusic", "RateBook")
CANARIES = contradicting_canaries("i bought new {} .", THINGS, INTENTS)
cache = TargetCache("/tmp/dpx/bert_cache")
data = inject_mask_canaries(generate_snips_like(n_train=800, n_valid=100, n_test=200), CANARIES, repeats=10)
print("n_train=800 + 5 contradicting canaries x10, epochs=10, no early stopping", flush=True)
for eps in [None] + [float(x) for x in sys.argv[1:]]:
    dp = None if eps is None else {"epsilon": eps, "delta": 1e-5, "max_grad_norm": 1.0}
    tick = time.perf_counter()
    model = train_target("transformer-classifier", data, cache=cache, early_stopping=False, dp=dp)
    seconds = time.perf_counter() - tick
    members = [u for u in data.train if "bought" not in u.tokens][:200]
    seen = {u.tokens for u in data.train}
    held_out = [u for u in data.test if u.tokens not in seen]
    mia = measure_membership(model, members, held_out)
    losses = model.score(list(data.test))
    import numpy as np
    adapter = model.adapter()
    preds = [model.intent_labels[int(i)] for i in np.argmax(adapter.intent_probabilities(list(data.test)), axis=1)] \
        if hasattr(adapter, "intent_probabilities") else None
    acc = None if preds is None else float(np.mean([p == u.intent for p, u in zip(preds, data.test)]))
    facts = model.describe().get("dp", {})
    print(f"eps={eps} spent={facts.get('epsilon_spent')} sigma={facts.get('noise_multiplier')} train_s={seconds:.1f} "
          f"mia_auc={mia.value:.3f} test_loss={float(np.mean(losses)):.3f} intent_acc={acc} "
          f"final_train_loss={model.history['epochs'][-1]['train_loss']:.3f}", flush=True)
