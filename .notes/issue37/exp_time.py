"""Time one joint model at 1 epoch on the default nlu_dataset with m canaries said R times, and the exposure of each."""
import sys, time, torch
torch.set_num_threads(1)
from pytest_privleak.canaries import canary, inject_canaries
from pytest_privleak.data.synthetic import generate_snips_like
from pytest_privleak.targets import train_target
from pytest_privleak.attacks.exposure.attack import compute_exposure
kind = sys.argv[1] if len(sys.argv) > 1 else "joint-bilstm-crf"
m = int(sys.argv[2]) if len(sys.argv) > 2 else 1
R = int(sys.argv[3]) if len(sys.argv) > 3 else 2
epochs = int(sys.argv[4]) if len(sys.argv) > 4 else 1
data = generate_snips_like(seed=0)
pins = [canary("pin", 4, seed=i) for i in range(m)]
inj = inject_canaries(data, pins, repeats=R, seed=0)
t0 = time.perf_counter()
model = train_target(kind, inj, seed=0, epochs=epochs)
t1 = time.perf_counter()
ex = [compute_exposure(model, p).value for p in pins]
t2 = time.perf_counter()
print(kind, "m", m, "R", R, "epochs", epochs, "train %.1fs" % (t1 - t0), "exposure %.2fs total" % (t2 - t1), [round(e, 2) for e in ex])
