"""Issue 37: choose the number of canaries m per model. For each m and R, train joint models (1 epoch, default
nlu_dataset) with training seeds 0..K-1, insert m distinct pins (one set, drawn once) R times each, score the pin
space ONCE per model and rank each canary among the secrets that are not in the set (exact exposure).
Prints one JSON line per (m, R, seed): the per-canary exposures. Run: python exp_choose_m.py K kind epochs ms Rs."""
import json, sys, time, math, random
import numpy as np, torch
torch.set_num_threads(1)
from pytest_privleak.canaries import canary, inject_canaries
from pytest_privleak.data.synthetic import generate_snips_like
from pytest_privleak.targets import train_target
from pytest_privleak.cache.targets import TargetCache
from pytest_privleak.attacks.exposure.attack import secret_scorer, score_secrets
from pytest_privleak.attacks.candidates import enumerate_space, secret_index

K = int(sys.argv[1]); kind = sys.argv[2]; epochs = int(sys.argv[3])
ms = [int(x) for x in sys.argv[4].split(",")]; Rs = [int(x) for x in sys.argv[5].split(",")]
cache = TargetCache("/work/wt-power/.privleak-bench-cache/targets")
data = generate_snips_like(seed=0)

def draw_set(m, seed=0):
    rng = random.Random(f"canary-set:{seed}")
    out, seen = [], set()
    while len(out) < m:
        s = tuple(str(rng.randrange(10)) for _ in range(4))
        if s not in seen:
            seen.add(s); out.append(canary("pin", secret=s))
    return out

space = enumerate_space(10, 4, budget=None)
for m in ms:
    pins = draw_set(m)
    idx = np.array([secret_index(p.secret_indices, 10) for p in pins])
    for R in Rs:
        inj = inject_canaries(data, pins, repeats=R, seed=0)
        for s in range(K):
            t0 = time.perf_counter()
            model = train_target(kind, inj, seed=s, epochs=epochs, cache=cache)
            t1 = time.perf_counter()
            scores = score_secrets(secret_scorer(model, pins[0]), space, 4096)
            mask = np.ones(scores.size, bool); mask[idx] = False
            others = np.sort(scores[mask])
            size = others.size + 1
            ex = [math.log2(size) - math.log2(1 + int(np.searchsorted(others, scores[i], side="right"))) for i in idx]
            print(json.dumps({"kind": kind, "epochs": epochs, "m": m, "R": R, "seed": s, "exposure": ex,
                              "train_s": round(t1 - t0, 2), "score_s": round(time.perf_counter() - t1, 2)}), flush=True)
