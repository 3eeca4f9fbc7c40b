"""Issue 37: how far a canary set's mean exposure moves between torch thread counts (the processor spread the
gate's tolerance must exceed): joint model, 1 epoch, 8 pins said R=2 times, seeds 0..K-1, threads 1 and 2."""
import json, sys, time
import torch
from pytest_privleak.canaries import canary, inject_canaries
from pytest_privleak.data.synthetic import generate_snips_like
from pytest_privleak.targets import train_target
from pytest_privleak.attacks.exposure.canary_set import compute_set_exposure

K = int(sys.argv[1]); epochs = int(sys.argv[2]) if len(sys.argv) > 2 else 1
pins = canary("pin", seed=0, count=8)
data = inject_canaries(generate_snips_like(seed=0), pins, repeats=2)
for s in range(K):
    out = {}
    for threads in (1, 2):
        torch.set_num_threads(threads)
        model = train_target("joint-bilstm-crf", data, seed=s, epochs=epochs)
        torch.set_num_threads(1)
        out[threads] = [e.value for e in compute_set_exposure(model, pins)]
    d = [b - a for a, b in zip(out[1], out[2])]
    print(json.dumps({"seed": s, "t1": out[1], "t2": out[2], "mean_diff": sum(d) / len(d),
                      "max_abs_diff": max(abs(x) for x in d)}), flush=True)
