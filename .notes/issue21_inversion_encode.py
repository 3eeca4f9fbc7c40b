"""Issue 21 item 4: encode a pool of generated Citizen IDs with the real MiniLM once, in chunks, for training
experiments on cached embeddings (the attacker's training pool: stream 1 of seed 0; victims: stream 2, as
invert_embeddings draws them). Writes /tmp/i21inv/{victims,train_K}.npz."""
import sys, time
import numpy as np, torch
torch.set_num_threads(1)
from pytest_privleak.adapters.encoder import load_minilm
from pytest_privleak.embeddings.patterns import CitizenIdPattern

out = sys.argv[1] if len(sys.argv) > 1 else "/tmp/i21inv"
chunks = int(sys.argv[2]) if len(sys.argv) > 2 else 12
enc, p = load_minilm(), CitizenIdPattern()
v = p.sample(1000, np.random.default_rng([0, 2]))
np.savez(f"{out}/victims.npz", z=enc.encode(v.texts), **v.labels)
rng = np.random.default_rng([0, 1])
for k in range(chunks):
    t = time.perf_counter()
    s = p.sample(10000, rng)
    np.savez(f"{out}/train_{k}.npz", z=enc.encode(s.texts), **s.labels)
    print(k, f"{10000 / (time.perf_counter() - t):.0f} IDs/s", flush=True)
