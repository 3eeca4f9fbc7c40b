import sys, time, torch
torch.set_num_threads(1)
sys.path.insert(0, ".")
from intent_model.model import IntentSlotGRU, Labels, SoftInputAdapter
from intent_model.train import train
from pytest_privleak import TargetRecipe, measure_membership
from pytest_privleak.targets.own_model import train_own_model
from pytest_privleak.data import generate_snips_like
def build(d): return IntentSlotGRU(Labels.from_utterances(d.train))
rows = {}
for seed in range(4):
  corpus = generate_snips_like(n_train=300, n_valid=900, n_test=1200, seed=seed + 3)
  model = train_own_model(train, corpus, build=build, wrap=SoftInputAdapter, epochs=12, seed=seed)
  members = list(dict.fromkeys(corpus.train))
  rec = [u for u in dict.fromkeys([*corpus.test, *corpus.valid]) if u not in set(members)]
  non, pop = rec[:1000], rec[1200:1800]
  recipe = TargetRecipe(corpus, train=train, build=build, wrap=SoftInputAdapter, config={"epochs": 12})
  for method, k, online in (("loss",0,False),("lira",4,False),("rmia",4,False),("rmia",8,False)):  # online rows: see issue18_rmia_audit (online now takes at most 2n candidates)
    kw = dict(references=recipe, k=k, population=pop, online=online) if k else {}
    try:
        r = measure_membership(model, members, non, method=method, **kw)
    except TypeError as e:
        kw.pop("online"); r = measure_membership(model, members, non, method=method, **kw)
    rows.setdefault((method,k,online), []).append((r.value, r.extra.get("tpr_at_fpr_0.01"), r.extra.get("tpr_at_fpr_0.001")))
for key, v in rows.items():
    import numpy as np; a=np.array(v); print(key, "AUC %.3f TPR@1%% %.3f TPR@0.1%% %.4f" % tuple(a.mean(0)))
