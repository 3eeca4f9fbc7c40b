"""Do canaries of one template interfere in the joint BiLSTM-CRF? m=1 vs m=8, R=2/100, seed 0/1."""
import sys, time
import pytest_privleak as pl
from pytest_privleak.targets import train_target
from pytest_privleak.data.synthetic import generate_snips_like
from pytest_privleak.cache.targets import TargetCache

cache = TargetCache("/tmp/interf_cache")
base = generate_snips_like(seed=0)
for seed in (0, 1):
    for R in (2, 100):
        for m in (1, 8):
            cs = pl.canary("pin", seed=seed, count=m)
            data = pl.inject_canaries(base, cs, repeats=R, seed=seed)
            t = time.time()
            model = train_target("joint-bilstm-crf", data, cache=cache, seed=seed)
            e = pl.measure_exposure(model, cs)
            c = pl.measure_cea(model, cs, trials=10)
            print(f"seed {seed} R {R:3d} m {m}: exposure {e.value:6.2f} per {[round(x,1) for x in (e.extra or {}).get('per_canary', [])]} cea {c.value:.3f} ({time.time()-t:.0f}s)", flush=True)
