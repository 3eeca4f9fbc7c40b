import sys, numpy as np, torch, warnings
warnings.filterwarnings("ignore"); sys.path.insert(0, "tests"); torch.set_num_threads(1)
import dp_pipelines as P
from pytest_privleak.data.synthetic import generate_snips_like
from pytest_privleak.attacks.dp_training import measure_dp_training
from pytest_privleak.dp.canaries import mislabelled_canaries
data = P.imbalanced(generate_snips_like(n_train=300, n_valid=0, n_test=0))
for m, label in ((200, "random"), (60, "rarest")):
    vals = []
    for s in range(5):
        can = mislabelled_canaries(data, m, seed=s, label=label)
        cfg = {"epsilon": 2.0, "delta": 1e-5, "bug": "weighted-sampler", "class_weights": P.class_weights(data)}
        vals.append(measure_dp_training(P.train, data, 2.0, 1e-5, build=P.build, wrap=P.Scorer, method="one-run", threat_model="black-box", config=cfg, seed=s, canaries=can, check_seed=False).value)
    print(m, label, np.round(vals, 3), flush=True)
