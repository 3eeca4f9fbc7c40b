import sys, time, os, json, numpy as np, torch, warnings
warnings.filterwarnings("ignore")
sys.path.insert(0, "tests")
torch.set_num_threads(1)
import dp_pipelines as P
from pytest_privleak.data.synthetic import generate_snips_like
from pytest_privleak.attacks.dp_training import measure_dp_training
base = generate_snips_like(n_train=300, n_valid=0, n_test=0)
runs = json.loads(sys.argv[1])   # list of [bug, eps, threat, canaries, extra]
seeds = int(sys.argv[2])
for bug, eps, tm, m, extra in runs:
    data = P.imbalanced(base) if bug == "weighted-sampler" else base
    cfg = {"epsilon": eps, "delta": 1e-5, "bug": bug, **extra}
    if bug == "weighted-sampler": cfg["class_weights"] = P.class_weights(data)
    vals=[]; t=time.time()
    for s in range(seeds):
        r = measure_dp_training(P.train, data, eps, 1e-5, build=P.build, wrap=P.Scorer, method="one-run", threat_model=tm, config=cfg, seed=s, check_seed=False, canaries=m)
        vals.append(r.value)
    vals=np.array(vals)
    print(json.dumps({"bug":bug,"eps":eps,"tm":tm,"m":m,"extra":extra,"caught":int((vals>eps).sum()),"seeds":seeds,"median":round(float(np.median(vals)),3),"min":round(float(vals.min()),3),"max":round(float(vals.max()),3),"s_per_seed":round((time.time()-t)/seeds,2)}), flush=True)
