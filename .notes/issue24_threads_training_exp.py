"""Issue 24 item 6: do keyword inference and Mix And Match figures move between 1 and 2 torch threads (bitwise)?

Runs each attack's computation (no result cache) as the sample project calls it, at 1 then 2 threads, and
compares the intermediate tensors and the result's JSON. Usage: python issue24_threads_training_exp.py CACHE_DIR [THREAD COUNTS...]
"""
import json
import sys
import time

import numpy as np
import torch

from pytest_privleak.adapters.encoder import load_minilm
from pytest_privleak.attacks.mix_and_match_assertion import _result as mm_result
from pytest_privleak.attacks.mix_and_match import mix_and_match
from pytest_privleak.attacks.mix_and_match_canaries import contradicting_canaries, inject_mask_canaries, mask_canary
from pytest_privleak.cache.opening import open_cache
from pytest_privleak.data import generate_snips_like
from pytest_privleak.embeddings.keyword_assertion import _result as kw_result, _run as kw_run
from pytest_privleak.embeddings.training import encode
from pytest_privleak.embeddings.corpora import medical_corpus
from pytest_privleak.embeddings.defences import subspace_projection
from pytest_privleak.targets import train_target

BODY = ("leg", "hand")
encoder = load_minilm()
defended = subspace_projection(encoder, BODY, medical_corpus(200, np.random.default_rng(100)).texts, beta=0.2)
NEVER = mask_canary("i bought new umbrella .", "AddToPlaylist")
PURCHASES = contradicting_canaries("i bought new {} .", ("towels", "lamp", "piano"),
                                   ("AddToPlaylist", "BookRestaurant", "GetWeather"))
torch.set_num_threads(1)
clf = train_target("transformer-classifier", inject_mask_canaries(generate_snips_like(seed=0), PURCHASES, repeats=10),
                   base="tiny-bert", early_stopping=False, cache=open_cache(sys.argv[1]), seed=0)
texts = medical_corpus(300, np.random.default_rng(5)).texts
out = {}
COUNTS = tuple(int(c) for c in sys.argv[2:]) or (1, 2)
for threads in COUNTS:
    torch.set_num_threads(threads)
    t0 = time.perf_counter()
    row = {"embeddings": encode(encoder, texts, what="x")}
    for label, enc in (("raw", encoder), ("defended", defended)):
        m = kw_run(enc, BODY, None, None, None, "white-box", "auto", None, 300, 0, 0.95)
        row[f"kw {label}"] = json.dumps(kw_result(enc, m, None, None, None).to_json(), sort_keys=True)
    t1 = time.perf_counter()
    for label, c in (("never", NEVER), ("towels", PURCHASES[0])):
        m = mix_and_match(clf, c, method="auto", budget=50_000, batch_size=512, generator="frankenstein")
        r = mm_result(clf, m, None, 10, None, 0.95)
        r.extra.pop("seconds")
        row[f"mm {label}"] = json.dumps(r.to_json(), sort_keys=True)
    print(f"threads {threads}: keyword {t1 - t0:.1f} s, mix-and-match {time.perf_counter() - t1:.1f} s", flush=True)
    out[threads] = row
for other in COUNTS[1:]:
  print(f"--- 1 thread against {other}")
  for key in out[1]:
    a, b = out[1][key], out[other][key]
    if isinstance(a, np.ndarray):
      print(key, "bitwise equal:", np.array_equal(a, b), "max |diff|:", float(np.abs(a - b).max()))
    else:
      print(key, "bitwise equal:", a == b)
      if a != b:
        ja, jb = json.loads(a), json.loads(b)
        print("   differs in:", [k for k in ja if ja[k] != jb[k]], [(ja[k], jb[k]) for k in ("value", "extra") if ja[k] != jb[k]])
