"""How far does the Mix And Match rank move under numerical noise (batch size, float64) on the test model?"""
import copy, sys, torch
torch.set_num_threads(1)
sys.path.insert(0, "/work/main")
from pytest_privleak.attacks.mix_and_match import as_attack_model, mid_rank, MixAndMatchModel
from pytest_privleak.attacks.mix_and_match_canaries import contradicting_canaries, inject_mask_canaries, mask_canary, organic_canary, random_canary
from pytest_privleak.cache import TargetCache
from pytest_privleak.data.synthetic import generate_snips_like
from pytest_privleak.targets import train_target
THINGS = ("towels", "lamp", "piano", "wallet", "camera")
INTENTS = ("AddToPlaylist", "BookRestaurant", "GetWeather", "PlayMusic", "RateBook")
canaries = contradicting_canaries("i bought new {} .", THINGS, INTENTS)
data = generate_snips_like(n_train=800, n_valid=100, n_test=100)
model = train_target("transformer-classifier", inject_mask_canaries(data, canaries, repeats=10),
                     cache=TargetCache("/work/main/.privleak-cache"), early_stopping=False)
am = as_attack_model(model)
m64 = MixAndMatchModel(copy.deepcopy(model.classifier).double(), model.generator, model.tokenizer)
extra = [mask_canary(f"i bought new {w} .", i) for w, i in (("umbrella", "AddToPlaylist"), ("lamp", "GetWeather"), ("piano", "RateBook"), ("wallet", "BookRestaurant"), ("camera", "PlayMusic"))]
extra += [organic_canary(data, "RateBook", frequency="low", seed=s) for s in range(3)] + [random_canary(data, "PlayMusic", frequency="high", seed=s) for s in range(3)]
worst = 0
for c in (*canaries, *extra):
    try:
        true = am.candidate_index(c)
    except ValueError:
        continue
    ids, pos = am.encode(c); label = am.label_id(c.intent)
    ranks = []
    for m, bs in ((am, 512), (am, 37), (am, 1000), (m64, 512)):
        losses = m.class_losses(ids, pos, am.candidate_ids, label, bs)
        ranks.append(mid_rank(losses, true, lower_is_better=True))
    mids = [r[0] for r in ranks]
    worst = max(worst, max(mids) - min(mids))
    print(f"{c.masked_text[:40]:40s} [{c.intent[:12]}] mid-ranks f32 b512/b37/b1000/f64: {mids}  ranges {[r[1:] for r in ranks]}")
print("largest spread", worst)
