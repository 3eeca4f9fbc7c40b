"""Frankenstein candidate counts on the tiny BERT: variants of §4.3.1 and fine-tuning lr (issue 9 items 4-5).

Usage: python .notes/exp_frankenstein_variants.py [LR] [early]   (results: .notes/issue9_gaps.md)
"""
import copy, json, math, statistics, sys, time
import torch
torch.set_num_threads(1)
sys.path.insert(0, "/work/main")
from pytest_privleak.attacks.mix_and_match import as_attack_model, mix_and_match, frankenstein, mid_rank
from pytest_privleak.attacks.mix_and_match_canaries import contradicting_canaries, inject_mask_canaries, mask_canary
from pytest_privleak.cache import TargetCache
from pytest_privleak.data.synthetic import generate_snips_like
from pytest_privleak.targets import train_target
from pytest_privleak.targets.tiny_bert import mlm_epochs

THINGS = ("towels", "lamp", "piano", "wallet", "camera")
INTENTS = ("AddToPlaylist", "BookRestaurant", "GetWeather", "PlayMusic", "RateBook")
lr = float(sys.argv[1]) if len(sys.argv) > 1 else None
canaries = contradicting_canaries("i bought new {} .", THINGS, INTENTS)
data = generate_snips_like(n_train=800, n_valid=100, n_test=100)
t0 = time.time()
kw = {} if lr is None else {"lr": lr}
early = len(sys.argv) > 2 and sys.argv[2] == "early"
model = train_target("transformer-classifier", inject_mask_canaries(data, canaries, repeats=10),
                     cache=TargetCache("/work/main/.privleak-cache"), base="tiny-bert", early_stopping=early, **kw)
print("lr", model.config.lr, "train", round(time.time() - t0, 1), "s; epochs", [round(e["train_loss"], 3) for e in model.history["epochs"]], flush=True)
am = as_attack_model(model)
never = mask_canary("i bought new umbrella .", "AddToPlaylist")

def needed(fmodel, c):
    ids, pos = am.encode(c)
    with torch.no_grad():
        logits = fmodel(input_ids=ids.unsqueeze(0)).logits[0, pos].float()[am.candidate_ids]
    return mid_rank(logits, am.candidate_index(c), lower_is_better=False)[0]

# variants
franken = am.frankenstein
tied = frankenstein(model.classifier, model.generator)
tied.get_output_embeddings().weight = torch.nn.Parameter(tied.base_model.embeddings.word_embeddings.weight.detach().clone(), requires_grad=False)

def refit(fm, epochs=2, sentences=2000, decoder=False):
    from pytest_privleak.data.public_corpus import generate_public_corpus
    fm = copy.deepcopy(fm)
    tok = model.tokenizer
    corpus = generate_public_corpus(sentences, seed=1)
    enc = tok([list(s) for s in corpus], is_split_into_words=True, padding=True, return_tensors="pt")
    ids, att = enc["input_ids"], enc["attention_mask"]
    special = torch.isin(ids, torch.tensor(tok.all_special_ids)) | (att == 0)
    prefix = fm.base_model_prefix + "."
    for n, p in fm.named_parameters():
        p.requires_grad_(not n.startswith(prefix) and (decoder or "decoder" not in n))
    params = [p for p in fm.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-3, weight_decay=0.01)
    losses = mlm_epochs(fm, opt, ids, att, special, len(tok), epochs=epochs, batch_size=64, mask_probability=0.15,
                        generator=torch.Generator().manual_seed(0))
    fm.eval()
    return fm, losses

t1 = time.time()
refitted, rl = refit(franken)
print("refit head (transform+bias) losses", [round(x, 3) for x in rl], round(time.time() - t1, 1), "s", flush=True)
refitted_dec, rl2 = refit(franken, decoder=True)
print("refit head (+decoder) losses", [round(x, 3) for x in rl2], flush=True)
variants = {"frank(untied base decoder)": franken, "frank(decoder=fine-tuned emb)": tied,
            "frank+refit head": refitted, "frank+refit head+dec": refitted_dec, "base LM": am.base_lm}
V = len(am.candidate_words)
print("V", V)
rows = {}
for c in (*canaries, never):
    ex = mix_and_match(am, c, method="exhaustive").rankings[0]
    r = {k: needed(m, c) for k, m in variants.items()}
    rows[c.target] = r
    print(f"{c.target:8s} [{c.intent}] exh rank {ex.rank:g}  " + "  ".join(f"{k}: {v:g}" for k, v in r.items()), flush=True)
for k in variants:
    ratios = [V / rows[c.target][k] for c in canaries]
    print(f"{k:32s} median {statistics.median(ratios):.1f}x  max {max(ratios):.1f}x  (never-injected needs {rows['umbrella'][k]:g})")
