"""Measured false-alarm rate of the sampler tests on simulated correct Poisson loaders (issue 32, item 4)."""
import sys
sys.path.insert(0, "tests")
from test_dp_sampling import _false_alarms
runs = int(sys.argv[1])
for level in (0.05, 0.001):
    fired = _false_alarms(runs, seed=1234, level=level)
    print(f"{fired} of {runs} simulated Poisson loaders (N = 300, q = 64/300, 19 steps) flagged at {level}: "
          f"{fired / runs:.4f}", flush=True)
