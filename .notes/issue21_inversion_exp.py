"""Issue 21 item 4: year sub-attack training variants on cached MiniLM embeddings (/tmp/i21inv, written by
issue21_inversion_encode.py). Prints victim top-1 every `every` steps (research only: the attack itself never
sees the victims). Usage: python issue21_inversion_exp.py N_TRAIN STEPS VARIANT[,VARIANT..] [SUB]
variants: base | wdX (AdamW weight decay X) | noiseX (Gaussian input noise sd X) | dropX (input dropout X)
| cosine (lr cosine decay) | lrX | bsX (batch) | hX (hidden units) | relu"""
import glob, sys, time
import numpy as np, torch
torch.set_num_threads(1)
from torch import nn
from pytest_privleak.embeddings.training import Standardiser, mlp

n_train, steps = int(sys.argv[1]), int(sys.argv[2])
variants = sys.argv[3].split(",")
sub = sys.argv[4] if len(sys.argv) > 4 else "year"
every = int(sys.argv[5]) if len(sys.argv) > 5 else max(steps // 10, 1)
files = sorted(glob.glob("/tmp/i21inv/train_*.npz"), key=lambda f: int(f.split("_")[-1].split(".")[0]))
zs, ys = [], []
for f in files:
    d = np.load(f); zs.append(d["z"]); ys.append(d[sub])
z, y = np.concatenate(zs)[:n_train], np.concatenate(ys)[:n_train]
assert len(z) == n_train, f"only {len(z)} encoded"
v = np.load("/tmp/i21inv/victims.npz")
scale = Standardiser(z)
x, xv = scale(z), scale(v["z"])
yt, yv = torch.as_tensor(y, dtype=torch.long), torch.as_tensor(v[sub], dtype=torch.long)
hold = n_train // 10
classes = {"year": 100, "month": 12, "day": 31}[sub]
hidden = {"year": 400, "month": 25, "day": 200}[sub]

for variant in variants:
    opts = dict(wd=0.0, noise=0.0, drop=0.0, cosine=False, lr=1e-3, bs=128, h=hidden, act=nn.Sigmoid)
    for part in variant.split("+"):
        for key in ("wd", "noise", "drop", "lr", "bs", "h"):
            if part.startswith(key) and part[len(key):][:1].isdigit():
                opts[key] = type(opts[key])(float(part[len(key):])) if key not in ("bs", "h") else int(part[len(key):])
        if part == "cosine": opts["cosine"] = True
        if part == "relu": opts["act"] = nn.ReLU
    net = mlp(x.shape[1], (opts["h"],), classes, seed=0, activation=opts["act"])
    if opts["drop"]:
        net = nn.Sequential(nn.Dropout(opts["drop"]), *net)
    opt = torch.optim.AdamW(net.parameters(), lr=opts["lr"], weight_decay=opts["wd"]) if opts["wd"] else \
        torch.optim.Adam(net.parameters(), lr=opts["lr"])
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps) if opts["cosine"] else None
    g = torch.Generator().manual_seed(0)
    t0 = time.perf_counter(); curve = []
    for s in range(1, steps + 1):
        net.train()
        rows = torch.randint(0, n_train, (opts["bs"],), generator=g)
        xb = x[rows]
        if opts["noise"]:
            xb = xb + opts["noise"] * torch.randn(xb.shape, generator=g)
        loss = nn.functional.cross_entropy(net(xb), yt[rows])
        opt.zero_grad(); loss.backward(); opt.step()
        if sched: sched.step()
        if s % every == 0 or s == steps:
            net.eval()
            with torch.no_grad():
                vic = float((net(xv).argmax(1) == yv).float().mean())
                tr = float((net(x[:2000]).argmax(1) == yt[:2000]).float().mean())
            curve.append(f"{s}:{vic:.3f}/{tr:.2f}")
    print(f"{sub} n={n_train} {variant}: victims/train " + " ".join(curve) + f" ({time.perf_counter() - t0:.0f} s)",
          flush=True)
