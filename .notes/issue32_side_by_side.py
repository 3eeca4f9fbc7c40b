"""Issue 32 side by side with main: white-box one-run defaults on tests/dp_pipelines.py's correct pipeline and its
per-batch bug, seeds 0-2; run once under main's code and once under this branch's, alternating, same machine.
Usage: PYTHONPATH=<tree> python .notes/issue32_side_by_side.py <label>   (run from that tree)"""
import functools, json, sys, time
sys.path.insert(0, "tests")
import torch
torch.set_num_threads(1)
import dp_pipelines as P
P._noise_multiplier = functools.lru_cache(maxsize=None)(P._noise_multiplier)
from pytest_privleak.dp.audit import measure_dp_training
from pytest_privleak.data.synthetic import generate_snips_like
data = generate_snips_like(n_train=300, n_valid=0, n_test=0)
for bug, eps in (("none", 1.0), ("none", 4.0), ("none", 8.0), ("per-batch-clip", 2.0)):
    for seed in range(3):
        t = time.perf_counter()
        r = measure_dp_training(P.train, data, eps, 1e-5, build=P.build, method="one-run", threat_model="white-box",
                                config={"epsilon": eps, "delta": 1e-5, "bug": bug}, check_seed=False, seed=seed)
        print(json.dumps({"code": sys.argv[1], "bug": bug, "claim": eps, "seed": seed, "eps_lcb": round(r.value, 3),
                          "s": round(time.perf_counter() - t, 2)}), flush=True)
