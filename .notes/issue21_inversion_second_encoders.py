"""Issue 21 item 4: is the default budget (80,000 IDs, 16,000 steps) tuned to MiniLM only? The same Citizen-ID attack
at the old default (20,000 / 3000), the new default and a larger one on (a) the tiny random BERT of the CI tests
(tests/helpers_embeddings.tiny_encoder, run end to end through invert_embeddings) and (b) MiniLM behind the §VII
rounding defence (2 decimals) and Laplace noise, applied to the cached embeddings of /tmp/i21inv.
Usage: python issue21_inversion_second_encoders.py tiny|rounded|laplace"""
import glob, sys, time
import numpy as np, torch
torch.set_num_threads(1)
sys.path.insert(0, "tests")
from pytest_privleak.embeddings.inversion import _citizen, invert_embeddings
from pytest_privleak.embeddings.patterns import CitizenIdPattern
from pytest_privleak.embeddings.training import Standardiser

BUDGETS = [(20000, 3000), (80000, 16000), (120000, 24000)]
which = sys.argv[1]
budgets = BUDGETS if len(sys.argv) < 3 else [tuple(map(int, b.split(":"))) for b in sys.argv[2].split(",")]
if which == "tiny":
    from helpers_embeddings import tiny_encoder
    enc = tiny_encoder(seed=0)
    for n, steps in budgets:
        t = time.perf_counter()
        m = invert_embeddings(enc, "citizen-id", n_train=n, steps=steps)
        print(which, n, steps, " ".join(f"{f.name} {f.top1:.3f}" for f in m.figures),
              f"whole {m.extra['whole_date_top1']:.3f} ({time.perf_counter() - t:.0f} s)", flush=True)
else:
    files = sorted(glob.glob("/tmp/i21inv/train_*.npz"), key=lambda f: int(f.split("_")[-1].split(".")[0]))
    data = [np.load(f) for f in files]
    v = np.load("/tmp/i21inv/victims.npz")
    rng = np.random.default_rng(0)
    def defend(z):
        if which == "rounded":
            return np.round(z, 2)
        return z + rng.laplace(0.0, 0.02, size=z.shape)    # per-coordinate scale 0.02 (MiniLM coords ~0.05)
    zall = defend(np.concatenate([d["z"] for d in data]))
    zv = defend(v["z"])
    p = CitizenIdPattern()
    for n, steps in budgets:
        t = time.perf_counter()
        y = {k: np.concatenate([d[k] for d in data])[:n] for k in p.sub_attacks}
        scale = Standardiser(zall[:n])
        m = _citizen(p, p.sub_attacks, scale(zall[:n]), scale(zv), y, {k: v[k] for k in p.sub_attacks}, n, steps, 0, 0.95)
        print(which, n, steps, " ".join(f"{f.name} {f.top1:.3f}" for f in m.figures),
              f"whole {m.extra['whole_date_top1']:.3f} ({time.perf_counter() - t:.0f} s)", flush=True)
