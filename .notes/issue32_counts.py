"""Issue 32 counts: the DP-SGD audit on loops written apart from it (tests/dp_own_loops.py), one background job.

White-box one-run audits at their defaults (claimed eps 2 unless said, delta 1e-5, confidence 0.95): each bug over
20 seeds, the correct loops over 100; the sampler audit (measure_dp_sampling, neighbours on) likewise.  One JSON
line per audit on stdout; .notes/issue32_counts_summary.py turns them into the table.
Run: PYTHONPATH=$PWD OMP_NUM_THREADS=1 python .notes/issue32_counts.py white > .notes/issue32_counts_white.jsonl
     PYTHONPATH=$PWD OMP_NUM_THREADS=1 python .notes/issue32_counts.py sampling > .notes/issue32_counts_sampling.jsonl
"""
import json
import sys
import time

sys.path.insert(0, "tests")
import torch

torch.set_num_threads(1)
import dp_own_loops as L  # noqa: E402
from pytest_privleak.data.synthetic import generate_snips_like  # noqa: E402
from pytest_privleak.dp.audit import measure_dp_training  # noqa: E402
from pytest_privleak.dp.sampling_audit import measure_dp_sampling  # noqa: E402

data = generate_snips_like(n_train=300, n_valid=0, n_test=0)
LOOPS = {"plain": L.train_plain, "opacus": L.train_opacus}
WHITE = [("plain", {"bug": "noise-off"}, 2.0, 20), ("plain", {"bug": "noise-off"}, 1.0, 20),
         ("plain", {"bug": "noise-div10"}, 2.0, 20), ("plain", {"bug": "per-batch-clip"}, 2.0, 20),
         ("plain", {"bug": "per-batch-clip-expected"}, 2.0, 20), ("plain", {"bug": "drop-rows"}, 2.0, 20),
         ("opacus", {"bug": "noise-off"}, 2.0, 20), ("opacus", {"bug": "noise-off", "groups": "bias-first"}, 1.0, 20),
         ("opacus", {"bug": "drop-rows"}, 2.0, 20),
         ("plain", {"bug": "none"}, 2.0, 100), ("opacus", {"bug": "none"}, 2.0, 100)]
SAMPLING = [("plain", "fixed-batches", 20), ("plain", "weighted-sampler", 20), ("plain", "normalise-actual", 20),
            ("plain", "normalise-floor", 20), ("opacus", "fixed-batches", 20), ("opacus", "weighted-sampler", 20),
            ("opacus", "normalise-floor", 20), ("plain", "none", 100), ("opacus", "none", 100)]


def emit(row):
    print(json.dumps(row), flush=True)


def white(loop, config, eps, seed):
    t = time.perf_counter()
    row = {"audit": "white-box", "loop": loop, **config, "claim": eps, "seed": seed}
    try:
        r = measure_dp_training(LOOPS[loop], data, eps, 1e-5, build=L.build, method="one-run",
                                threat_model="white-box", config={"epsilon": eps, **config}, seed=seed,
                                check_seed=False)
        row.update(eps_lcb=round(r.value, 4), flagged=r.value > eps,
                   **{k[12:]: round(v, 4) for k, v in r.extra.items() if k.startswith("epsilon_lcb_white")})
    except ValueError as exc:
        row.update(refused=str(exc)[:160], flagged=True)
    row["s"] = round(time.perf_counter() - t, 1)
    emit(row)


def sampling(loop, bug, seed):
    t = time.perf_counter()
    r = measure_dp_sampling(LOOPS[loop], data, build=L.build, config={"bug": bug}, seed=seed)
    emit({"audit": "sampling", "loop": loop, "bug": bug, "seed": seed, "p_value": r.value, "flagged": r.value <= 0.05,
          "failed": r.evidence["properties"].split("failed: ")[-1], "accounted_q": r.extra["accounted_q"],
          "measured_q": round(r.extra["measured_q"], 4), "s": round(time.perf_counter() - t, 1)})


which = sys.argv[1] if len(sys.argv) > 1 else "all"
if which in ("all", "white"):
    for loop, config, eps, seeds in WHITE:
        for seed in range(seeds):
            white(loop, config, eps, seed)
if which in ("all", "sampling"):
    for loop, bug, seeds in SAMPLING:
        for seed in range(seeds):
            sampling(loop, bug, seed)
