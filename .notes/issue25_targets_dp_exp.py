"""Issue 25 item 4: exposure and CEA of a repeated pin in the joint model, with and without DP-SGD.

Run: /work/venv/bin/python .notes/issue25_targets_dp_exp.py N_TRAIN REPEATS EPOCHS SEEDS EPS [EPS ...]
(SEEDS e.g. 0,1,2: the training seed). One CPU thread; per seed the same data, config and seed; only dp differs.
"""
import sys
import time

import torch

torch.set_num_threads(1)
from pytest_privleak.attacks.cea_assertion import measure_cea
from pytest_privleak.attacks.exposure_assertion import measure_exposure
from pytest_privleak.attacks.membership_assertion import measure_membership
from pytest_privleak.canaries import canary, inject_canaries
from pytest_privleak.data.synthetic import generate_snips_like
from pytest_privleak.targets import train_target

n_train, repeats, epochs = (int(x) for x in sys.argv[1:4])
seeds = [int(s) for s in sys.argv[4].split(",")]
epsilons = [None] + [float(x) for x in sys.argv[5:]]
pin = canary("pin", 4, seed=0)
data = inject_canaries(generate_snips_like(n_train=n_train, n_valid=40, n_test=100, seed=0), pin, repeats=repeats)
small = dict(epochs=epochs, embedding_dim=32, hidden_dim=32)
print(f"n_train={n_train} repeats={repeats} epochs={epochs} dims=32 pin={pin.text!r}", flush=True)
for seed in seeds:
    for eps in epsilons:
        dp = None if eps is None else {"epsilon": eps, "delta": 1e-5, "max_grad_norm": 1.0}
        tick = time.perf_counter()
        model = train_target("joint-bilstm-crf", data, progress=False, dp=dp, seed=seed, **small)
        seconds = time.perf_counter() - tick
        exposure = measure_exposure(model, pin)
        cea = measure_cea(model, pin)
        quality = model.evaluate(data.test)
        members = [u for u in data.train if u.tokens != pin.tokens][:len(data.test)]
        membership = measure_membership(model, members, data.test)
        facts = model.describe().get("dp", {})
        print(f"seed={seed} eps={eps} spent={facts.get('epsilon_spent')} sigma={facts.get('noise_multiplier')} "
              f"train_s={seconds:.1f} exposure={exposure.value:.3f} rank={exposure.evidence.get('rank')} "
              f"cea_acc={cea.value} cea_best_rank={cea.extra.get('best_rank_of_truth')} hdt={cea.extra.get('hdt')} "
              f"mia_auc={membership.value:.3f} mia_attack={membership.evidence.get('attack', membership.evidence.get('method'))} "
              f"intent_acc={quality['intent_accuracy']:.3f} slot_acc={quality['slot_accuracy']:.3f} "
              f"final_train_loss={model.history[-1]['train_loss']:.2f}", flush=True)
