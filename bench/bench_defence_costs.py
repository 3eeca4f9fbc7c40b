"""Measure what each §VII defence costs and buys on an encoder; store it for the assertions' remedies.

    python bench/bench_defence_costs.py [--model minilm|tiny] [--write]

For each defence setting (privacy-risks-language-model-embeddings §VII), on
the wrapped encoder:

* keyword attack: white-box keyword inference (§VI, SVM on a 50-text shadow
  corpus, 500 victims) on 5 body parts of the generated medical-style corpus;
* month attack: the Citizen-ID month sub-attack (§V, 4000 generated IDs,
  1000 steps of batch 128, 500 victims; chance 0.083);
* utility: the department task's accuracy (App. A benchmark classifier, 1000
  training and 500 test descriptions; chance ~0.1).

Every text is encoded once (the defences map embeddings, so the defended runs
reuse the raw embeddings). ``--write`` stores the rows in
``pytest_privleak/embeddings/defence_costs.py`` (atomically), where the
remedies of ``assert_embedding_inversion_at_most`` and
``assert_keyword_inference_at_most`` quote them.
"""
from __future__ import annotations

import argparse
import datetime
import os
import pprint
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
KEYWORDS = ("leg", "hand", "spine", "chest", "ankle")


class Memo:
    """Encodes each distinct text once (the raw encoder under every defence)."""

    def __init__(self, inner):
        self.inner, self.store = inner, {}

    def title(self):
        return self.inner.title()

    def encode(self, texts):
        missing = sorted({t for t in texts if t not in self.store})
        if missing:
            for t, z in zip(missing, self.inner.encode(missing)):
                self.store[t] = z
        return np.stack([self.store[t] for t in texts])


def settings(raw, defender_texts, defender_secrets):
    from pytest_privleak.embeddings import defences as d

    sensitivity = d.estimate_l1_sensitivity(raw, defender_texts, pairs=2000)
    return sensitivity, [
        ("rounded(decimals=2)", lambda: d.rounded(raw, 2)),
        ("rounded(decimals=1)", lambda: d.rounded(raw, 1)),
        ("laplace_noise(epsilon=100)", lambda: d.laplace_noise(raw, 100.0, sensitivity=sensitivity)),
        ("laplace_noise(epsilon=1000)", lambda: d.laplace_noise(raw, 1000.0, sensitivity=sensitivity)),
        ("privacy_preserving_mapping(lam=0.01)",
         lambda: d.privacy_preserving_mapping(raw, defender_texts, defender_secrets, lam=0.01, steps=600)),
        ("subspace_projection(beta=0.05)", lambda: d.subspace_projection(raw, KEYWORDS, defender_texts[:200], beta=0.05)),
    ]


def measure(encoder, victims, shadow):
    from pytest_privleak.embeddings.inversion import invert_embeddings
    from pytest_privleak.embeddings.keywords import infer_keywords
    from pytest_privleak.embeddings.utility import measure_utility

    keyword = infer_keywords(encoder, KEYWORDS, victims=victims, shadow=shadow).accuracy
    month = invert_embeddings(encoder, "citizen-id", n_train=4000, n_victims=500, steps=1000,
                              sub_attacks=("month",)).figures[0].top1
    utility = measure_utility(encoder, n_train=1000, n_test=500, steps=800).accuracy
    return {"keyword": round(keyword, 3), "month": round(month, 3), "utility": round(utility, 3)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="minilm", choices=["minilm", "tiny"])
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    from pytest_privleak.embeddings.corpora import MEDICAL_KEYWORDS, medical_corpus
    from pytest_privleak.embeddings.words import has_word

    if args.model == "minilm":
        from pytest_privleak.adapters.encoder import load_minilm

        raw, name = Memo(load_minilm()), "all-MiniLM-L6-v2"
    else:
        from helpers_embeddings import tiny_encoder

        raw, name = Memo(tiny_encoder(seed=0)), "tiny random BERT (tests/helpers_embeddings.py)"
    texts = medical_corpus(550, np.random.default_rng(40)).texts
    victims, shadow = texts[:500], texts[500:]
    defender = medical_corpus(1000, np.random.default_rng(41)).texts
    # the PPM's secret: which body part (0 = none of the five) a description names
    secrets = np.array([next((i + 1 for i, k in enumerate(KEYWORDS) if has_word(t, k)), 0) for t in defender])
    assert set(KEYWORDS) <= set(MEDICAL_KEYWORDS)
    start = time.perf_counter()
    rows = {"none": measure(raw, victims, shadow)}
    print(f"{'defence':<40}{'keyword':>9}{'month':>8}{'utility':>9}   (chance 0.5 / 0.083 / ~0.1)")
    print(f"{'none':<40}{rows['none']['keyword']:>9.3f}{rows['none']['month']:>8.3f}{rows['none']['utility']:>9.3f}")
    sensitivity, table = settings(raw, defender, secrets)
    for label, build in table:
        rows[label] = measure(build(), victims, shadow)
        r = rows[label]
        print(f"{label:<40}{r['keyword']:>9.3f}{r['month']:>8.3f}{r['utility']:>9.3f}", flush=True)
    print(f"l1 sensitivity estimate {sensitivity:.3f}; {time.perf_counter() - start:.0f} s")
    if args.write:
        write(rows, name, sensitivity)


def write(rows: dict, name: str, sensitivity: float) -> None:
    target = ROOT / "pytest_privleak" / "embeddings" / "defence_costs.py"
    source = target.read_text()
    head = source[:source.index("MEASURED = ")]
    tail = source[source.index("# end of measured figures"):]
    data = {"encoder": name, "date": datetime.date.today().isoformat(), "l1_sensitivity": round(sensitivity, 3),
            "rows": rows}
    body = "MEASURED = " + pprint.pformat(data, width=110, sort_dicts=False) + "\n"
    tmp = target.with_suffix(".py.tmp")
    tmp.write_text(head + body + tail)
    os.replace(tmp, target)
    print(f"wrote {target.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
