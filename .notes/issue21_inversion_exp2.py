"""Issue 21 item 4: stronger year attacks on cached MiniLM embeddings (research; victims only for scoring).
  paper   : 100-way year MLP (400 sigmoid), §V-C
  factor  : one MLP (400 sigmoid), heads tens + units of the year (10 + 10), year score = sum of log-probs
  both    : 100-way head + the two digit heads on one hidden layer, score = year log-prob + digit log-probs
  digitpos: App. B's position trick on the 8 birth-date digits: one MLP on z ⊕ p_i -> digit (10), year score =
            sum of the log-probs of its 4 digits
Usage: python issue21_inversion_exp2.py N_TRAIN STEPS VARIANT[,..] [EVERY]"""
import glob, sys, time
import numpy as np, torch
torch.set_num_threads(1)
from torch import nn
from torch.nn import functional as F
from pytest_privleak.embeddings.training import Standardiser, mlp
from pytest_privleak.embeddings.inversion import positional_embedding

n_train, steps = int(sys.argv[1]), int(sys.argv[2])
variants = sys.argv[3].split(",")
every = int(sys.argv[4]) if len(sys.argv) > 4 else max(steps // 10, 1)
files = sorted(glob.glob("/tmp/i21inv/train_*.npz"), key=lambda f: int(f.split("_")[-1].split(".")[0]))
load = lambda key: np.concatenate([np.load(f)[key] for f in files])[:n_train]
z = load("z"); assert len(z) == n_train, len(z)
lab = {k: load(k) for k in ("year", "month", "day")}
v = np.load("/tmp/i21inv/victims.npz")
scale = Standardiser(z); x, xv = scale(z), scale(v["z"])
def digits(year, month, day):   # the 8 birth-date digits [N, 8]
    s = (1920 + year) * 10000 + (month + 1) * 100 + (day + 1)
    return np.stack([(s // 10 ** (7 - i)) % 10 for i in range(8)], axis=1)
D, Dv = torch.as_tensor(digits(lab["year"], lab["month"], lab["day"])), torch.as_tensor(digits(v["year"], v["month"], v["day"]))
Y, Yv = torch.as_tensor(lab["year"]), torch.as_tensor(v["year"])
years = 1920 + torch.arange(100)
year_digits = torch.stack([(years // 10 ** (3 - i)) % 10 for i in range(4)], dim=1)  # [100, 4]
tens, units = (years // 10) % 10, years % 10

def run(variant):
    g = torch.Generator().manual_seed(0)
    d = x.shape[1]
    if variant == "digitpos":
        net = mlp(2 * d, (400,), 10, seed=0)
        pos_all = positional_embedding(torch.arange(1, 9), d)
    else:
        out = {"paper": 100, "factor": 20, "both": 120}[variant]
        net = mlp(d, (400,), out, seed=0)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    def year_scores(xx):
        if variant == "digitpos":
            n = xx.shape[0]
            inp = torch.cat([xx.repeat_interleave(4, 0), pos_all[:4].repeat(n, 1)], 1)
            lp = F.log_softmax(net(inp), 1).view(n, 4, 10)
            return sum(lp[:, i, year_digits[:, i]] for i in range(4))
        o = net(xx)
        if variant == "paper":
            return o
        k = 0 if variant == "factor" else 100
        s = F.log_softmax(o[:, k:k + 10], 1)[:, tens] + F.log_softmax(o[:, k + 10:k + 20], 1)[:, units]
        return s if variant == "factor" else s + F.log_softmax(o[:, :100], 1)
    t0, curve = time.perf_counter(), []
    for s in range(1, steps + 1):
        net.train()
        rows = torch.randint(0, n_train, (128,), generator=g)
        if variant == "digitpos":
            pos = torch.randint(0, 8, (128,), generator=g)
            loss = F.cross_entropy(net(torch.cat([x[rows], pos_all[pos]], 1)), D[rows, pos])
        else:
            o = net(x[rows]); yt = Y[rows]
            loss = 0
            if variant in ("paper", "both"):
                loss = loss + F.cross_entropy(o[:, :100], yt)
            if variant != "paper":
                k = 0 if variant == "factor" else 100
                loss = loss + F.cross_entropy(o[:, k:k + 10], tens[yt]) + F.cross_entropy(o[:, k + 10:k + 20], units[yt])
        opt.zero_grad(); loss.backward(); opt.step()
        if s % every == 0 or s == steps:
            net.eval()
            with torch.no_grad():
                vic = float((year_scores(xv).argmax(1) == Yv).float().mean())
                tr = float((year_scores(x[:1000]).argmax(1) == Y[:1000]).float().mean())
            curve.append(f"{s}:{vic:.3f}/{tr:.2f}")
    print(f"year n={n_train} {variant}: victims/train " + " ".join(curve) + f" ({time.perf_counter() - t0:.0f} s)", flush=True)

for variant in variants:
    run(variant)
