"""Canary sets on language models: m=1 vs m=8, R=2, seeds 0/1 (lstm-lm), exposure only."""
import time
import pytest_privleak as pl
from pytest_privleak.targets import train_target
from pytest_privleak.data.synthetic import generate_snips_like
from pytest_privleak.cache.targets import TargetCache

cache = TargetCache("/tmp/interf_cache")
base = generate_snips_like(seed=0)
for kind in ("lstm-lm",):
    for seed in (0, 1):
        for R in (2, 10):
            for m in (1, 8):
                cs = pl.canary("pin", seed=seed, count=m)
                data = pl.inject_canaries(base, cs, repeats=R, seed=seed)
                t = time.time()
                model = train_target(kind, data, cache=cache, seed=seed)
                e = pl.measure_exposure(model, cs)
                print(f"{kind} seed {seed} R {R:3d} m {m}: exposure {e.value:6.2f} ({time.time()-t:.0f}s)", flush=True)
