"""Issue 32 item 2 probe (5 seeds): the default white-box audit (about 384 of 2000 canaries 10·C tall, the rest C, one ranking) on marginal cases."""
import json, sys, time
sys.path.insert(0, "tests")
import torch
torch.set_num_threads(1)
import dp_own_loops as L, dp_pipelines as P
from pytest_privleak.dp.audit import measure_dp_training
from pytest_privleak.data.synthetic import generate_snips_like
data = generate_snips_like(n_train=300, n_valid=0, n_test=0)
CASES = [("plain", L.train_plain, L.build, {"bug": "noise-off"}, 2.0), ("plain", L.train_plain, L.build, {"bug": "noise-div10"}, 2.0),
         ("plain", L.train_plain, L.build, {"bug": "per-batch-clip"}, 2.0), ("old", P.train, P.build, {"bug": "rate-misreported"}, 1.0),
         ("opacus", L.train_opacus, L.build, {"bug": "noise-off", "groups": "bias-first"}, 1.0), ("plain", L.train_plain, L.build, {"bug": "none"}, 2.0)]
for seed in range(int(sys.argv[1])):
    for label, train, build, cfg, eps in CASES:
        t = time.time()
        r = measure_dp_training(train, data, eps, 1e-5, build=build, method="one-run", threat_model="white-box",
                                config={"epsilon": eps, **cfg}, check_seed=False, seed=seed)
        print(json.dumps({"loop": label, **cfg, "claim": eps, "seed": seed, "eps_lcb": round(r.value, 3),
                          **{"ceiling": round(r.extra["one_run_ceiling"], 3)},
                          "s": round(time.time() - t, 1)}), flush=True)
