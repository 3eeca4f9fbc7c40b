"""Does a second torch thread change the weights or the speed of a CI-sized target? (issue 11 item 6)

Trains the default ``joint-bilstm-crf`` on the bundled corpus with a pin, one
thread, two, one, two (interleaved, so load drift hits both), and prints each
time with the load average, whether each count repeats bitwise, and whether
one and two threads give the same weights. Usage: ``python bench/bench_threads.py [EPOCHS]``
(default 3).
"""
import os, sys, time
import torch
from pytest_privleak.data.synthetic import generate_snips_like
from pytest_privleak.canaries import canary, inject_canaries
from pytest_privleak.targets import train_target

epochs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
data = inject_canaries(generate_snips_like(seed=0), canary("pin", 4, seed=0), repeats=100, seed=0)
weights, times = {}, {1: [], 2: []}
for threads in (1, 2, 1, 2):
    load = os.getloadavg()[0]
    t = time.perf_counter()
    m = train_target("joint-bilstm-crf", data, cache=None, seed=0, epochs=epochs, progress=False, threads=threads)
    dt = time.perf_counter() - t
    times[threads].append(dt)
    sd = {k: v.clone() for k, v in m.net.state_dict().items()}
    if threads in weights:
        same_run = all(torch.equal(sd[k], weights[threads][k]) for k in sd)
        print(f"threads={threads}: repeat bitwise identical: {same_run}")
    weights[threads] = sd
    print(f"threads={threads}: {dt:.1f} s (load {load:.1f} -> {os.getloadavg()[0]:.1f})", flush=True)
a, b = weights[1], weights[2]
diff = max(float((a[k].float() - b[k].float()).abs().max()) for k in a)
print("1 vs 2 threads bitwise identical:", all(torch.equal(a[k], b[k]) for k in a), "max abs diff", diff)
print("median s: 1 thread", sorted(times[1])[0], "2 threads", sorted(times[2])[0])
