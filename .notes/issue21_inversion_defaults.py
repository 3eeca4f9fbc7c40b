"""Issue 21 item 4: the default Citizen-ID attack (inversion._citizen, DEFAULT_N_TRAIN / DEFAULT_STEPS) on cached
MiniLM embeddings (/tmp/i21inv from issue21_inversion_encode.py: the pool is stream 1 of seed 0 drawn 10,000 at a
time, so its first N are not bit-identical to pattern.sample(N) but come from the same generator).
Usage: python issue21_inversion_defaults.py [N_TRAIN] [STEPS]"""
import glob, sys, time
import numpy as np, torch
torch.set_num_threads(1)
from pytest_privleak.embeddings.inversion import DEFAULT_N_TRAIN, DEFAULT_STEPS, _citizen
from pytest_privleak.embeddings.patterns import CitizenIdPattern
from pytest_privleak.embeddings.training import Standardiser

n = int(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_N_TRAIN
steps = int(sys.argv[2]) if len(sys.argv) > 2 else DEFAULT_STEPS
files = sorted(glob.glob("/tmp/i21inv/train_*.npz"), key=lambda f: int(f.split("_")[-1].split(".")[0]))
load = lambda key: np.concatenate([np.load(f)[key] for f in files])[:n]
z = load("z"); y = {k: load(k) for k in ("year", "month", "day")}
v = np.load("/tmp/i21inv/victims.npz"); yv = {k: v[k] for k in ("year", "month", "day")}
scale = Standardiser(z)
p = CitizenIdPattern()
t = time.perf_counter()
m = _citizen(p, p.sub_attacks, scale(z), scale(v["z"]), y, yv, n, steps, 0, 0.95)
for f in m.figures:
    print(f"{f.name}: top-1 {f.top1:.3f} ({f.interval1[0]:.3f}..{f.interval1[1]:.3f}) top-5 {f.top5:.3f} chance {f.chance1:.3f}")
print("whole", m.extra, f"n={n} steps={steps} training {time.perf_counter() - t:.0f} s")
