import time, sys, torch
from pytest_privleak.canaries import canary, inject_canaries
from pytest_privleak.data import generate_snips_like
from pytest_privleak.targets import train_targets, parallel
kind = sys.argv[1]; epochs = int(sys.argv[2])
pin = canary("pin", length=4)
corpus = generate_snips_like(n_train=1500, n_valid=200, n_test=200, seed=0, unseen_share=0.5)
ds = inject_canaries(corpus, pin, repeats=1)
cfg = dict(dropout=0.2, char_embeddings=True, epochs=epochs) if kind == "joint-bilstm-crf" else dict(epochs=epochs)
out = {}
for lanes in (1, 2):
    parallel.configure(processes=lanes)
    t = time.perf_counter()
    models = train_targets(kind, [(ds, s) for s in range(7)], progress=False, **cfg)
    out[lanes] = (time.perf_counter() - t, [m.net.state_dict() if hasattr(m, "net") else m.model.state_dict() for m in models])
    print(kind, "lanes", lanes, round(out[lanes][0], 1), flush=True)
same = all(torch.equal(a[n], b[n]) for a, b in zip(out[1][1], out[2][1]) for n in a)
print("bitwise equal", same, "ratio 2/1", round(out[2][0] / out[1][0], 2))
