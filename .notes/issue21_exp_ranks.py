"""Issue 21: exact rank of an injected pin with and without word dropout (unk_alpha), one model per pin.

Usage: python .notes/issue21_exp_ranks.py CORPUS REPEATS ALPHAS PIN_SEEDS [EPOCHS]
CORPUS: realistic (generate_snips_like(1500,200,200, seed=3, unseen_share=0.5)), snips:SEED:N:SHARE, big:SEED:N
"""
import json, sys, time
import torch
torch.set_num_threads(1)
from pytest_privleak.attacks.cea import extract
from pytest_privleak.canaries import canary, inject_canaries
from pytest_privleak.data import generate_snips_like
from pytest_privleak.targets import train_target


def corpus(spec):
    if spec == "realistic":
        return generate_snips_like(n_train=1500, n_valid=200, n_test=200, seed=3, unseen_share=0.5)
    kind, *args = spec.split(":")
    if kind == "snips":
        seed, n, share = int(args[0]), int(args[1]), float(args[2])
        return generate_snips_like(n_train=n, n_valid=n // 8, n_test=n // 8, seed=seed, unseen_share=share)
    if kind == "nodigits":   # nodigits:DIGITS  the realistic corpus without training utterances saying them
        base = generate_snips_like(n_train=1500, n_valid=200, n_test=200, seed=3, unseen_share=0.5)
        gone = set(args[0])
        return base.with_train([u for u in base.train if not gone & set(u.tokens)])
    if kind == "big":
        sys.path.insert(0, ".notes")
        from issue21_big_corpus import generate_big
        return generate_big(int(args[1]), seed=int(args[0]), names_per_list=int(args[2]) if len(args) > 2 else 600)
    raise SystemExit(spec)


spec, repeats = sys.argv[1], int(sys.argv[2])
alphas = [float(a) for a in sys.argv[3].split(",")]
pin_seeds = [int(s) for s in sys.argv[4].split(",")]
epochs = int(sys.argv[5]) if len(sys.argv) > 5 else None
base = corpus(spec)
for s in pin_seeds:
    pin = canary("pin", seed=s)
    data = inject_canaries(base, pin, repeats=repeats)
    for a in alphas:
        t0 = time.time()
        cfg = dict(unk_alpha=a)
        if epochs:
            cfg["epochs"] = epochs
        model = train_target("joint-bilstm-crf", data, device="cpu", cache=None, seed=0, progress=False, **cfg)
        t1 = time.time()
        rep = extract(model, pin, method="exhaustive", budget=None)
        ev = model.evaluate(list(data.test))
        print(json.dumps({"corpus": spec, "R": repeats, "pin": pin.text, "pin_seed": s, "unk_alpha": a,
                          "rank": rep.ranks[0], "guess": " ".join(rep.reconstructed[0]), "train_s": round(t1 - t0, 1),
                          "score_s": round(time.time() - t1, 1), "intent_acc": round(ev["intent_accuracy"], 3),
                          "slot_acc": round(ev["slot_accuracy"], 3)}), flush=True)
