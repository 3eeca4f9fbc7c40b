import sys, time, json, numpy as np, torch, warnings
warnings.filterwarnings("ignore")
sys.path.insert(0, "tests")
torch.set_num_threads(1)
import dp_pipelines as P
from pytest_privleak.data.synthetic import generate_snips_like
from pytest_privleak.attacks.dp_training import measure_dp_training
data = generate_snips_like(n_train=300, n_valid=0, n_test=0)
tm = sys.argv[1]; lo, hi = int(sys.argv[2]), int(sys.argv[3])
for s in range(lo, hi):
    t = time.time()
    r = measure_dp_training(P.train, data, 2.0, 1e-5, build=P.build, wrap=P.Scorer, method="one-run", threat_model=tm, config={"epsilon": 2.0, "delta": 1e-5, "bug": "none"}, seed=s, check_seed=False)
    print(json.dumps({"tm": tm, "seed": s, "eps_lcb": round(r.value, 4), "steinke": round(r.extra["epsilon_lcb_steinke"], 4), "s": round(time.time()-t, 1)}), flush=True)
