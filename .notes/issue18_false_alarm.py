"""Issue 18 goal 'no false alarm': a model whose 'members' it never trained on; every method's AUC interval
should cover 0.5 in >= 95 % of seeds. Tiny lstm-lm (100 utterances, 40 epochs), k = 2 offline references."""
import sys, tempfile, time, warnings
import torch
from pytest_privleak.attacks.membership import membership_inference
from pytest_privleak.attacks.membership_references import TargetRecipe, train_references
from pytest_privleak.cache.targets import TargetCache
from pytest_privleak.data.synthetic import generate_snips_like
from pytest_privleak.targets import train_target

warnings.simplefilter("ignore")
torch.set_num_threads(1)
cache = TargetCache(tempfile.mkdtemp(prefix="m18_fa_"))
seeds = int(sys.argv[1]) if len(sys.argv) > 1 else 20
covered = {m: 0 for m in ("loss", "reference", "lira", "rmia")}
began = time.time()
for seed in range(seeds):
    data = generate_snips_like(n_train=100, n_valid=200, n_test=700, seed=seed)
    model = train_target("lstm-lm", data, cache=cache, epochs=40, progress=False)
    seen = set(data.train)
    unseen = [u for u in dict.fromkeys(data.test) if u not in seen]
    fake, non = unseen[:100], unseen[100:600]
    population = [u for u in dict.fromkeys(data.valid) if u not in seen and u not in set(unseen)]
    recipe = TargetRecipe(data, kind="lstm-lm", config={"epochs": 40, "progress": False}, cache=cache)
    refs = train_references(recipe, fake + non, population, k=2, seed=seed)
    row = []
    for method in covered:
        kw = {"reference": refs.models[0]} if method == "reference" else {"references": refs} if method != "loss" else {}
        m = membership_inference(model, fake, non, method=method, **kw)
        ok = m.interval[0] <= 0.5 <= m.interval[1]
        covered[method] += ok
        row.append(f"{method} {m.auc:.3f} ({m.interval[0]:.3f}-{m.interval[1]:.3f}){'' if ok else ' MISS'}")
    print(f"seed {seed}: " + "; ".join(row), flush=True)
print({m: f"{c}/{seeds}" for m, c in covered.items()}, f"{time.time() - began:.0f} s")
