"""Issue 24 item 6: do scoring attacks' figures change with torch's thread count? (exposure, CEA, d-exposure)"""
import torch
from pytest_privleak.canaries import canary, inject_canaries
from pytest_privleak.data import generate_snips_like
from pytest_privleak.targets import train_target
from pytest_privleak.attacks.exposure import compute_exposure
from pytest_privleak.attacks.cea import extract

data = generate_snips_like(seed=0)
pins = [canary("pin", seed=s) for s in (1, 2)]
model = train_target("joint-bilstm-crf", inject_canaries(data, pins, repeats=10), epochs=3, cache=None)
control = canary("pin", seed=99)
out = {}
for threads in (1, 2):
    torch.set_num_threads(threads)
    row = []
    for c in (*pins, control):
        e = compute_exposure(model, c)
        r = extract(model, [c], method="exhaustive", budget=None)
        row.append((e.value, e.rank, e.canary_score, r.ranks[0]))
    out[threads] = row
    print(threads, row)
same = [a[:2] == b[:2] and a[3] == b[3] for a, b in zip(out[1], out[2])]
diff = [abs(a[2] - b[2]) for a, b in zip(out[1], out[2])]
print("figures identical:", same, "max |score difference|:", max(diff))
