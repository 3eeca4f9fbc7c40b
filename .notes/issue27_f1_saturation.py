"""Issue 27 measurements: the default tagger's entity F1 at 25 epochs, and what float32 ranking would report at R=256."""
import sys, time
import numpy as np
import torch
torch.set_num_threads(1)
from pytest_privleak.attacks.d_exposure import PAPER_INSERTIONS, ambiguous_phrase, insert_phrases, d_exposure, class_words, fill, template_tokens, DEFAULT_TEMPLATE
from pytest_privleak.data.synthetic_ner import NER_CLASSES, generate_ner_like
from pytest_privleak.targets import train_target
corpus = generate_ner_like(n_train=600, n_valid=60, n_test=100, seed=0)
words = class_words(corpus, NER_CLASSES)
phrases = [ambiguous_phrase(w, c) for c, w in PAPER_INSERTIONS.items()]
t = time.time()
clean = None if "old" in sys.argv else train_target("ner-bilstm-crf", corpus, seed=0, progress=False)
if clean: print("defaults (25 epochs) R=0 seed 0: entity F1", clean.entity_f1, f"{time.time()-t:.0f}s")
import sys
OLD = dict(optimizer="adam", lr=5e-3, lr_decay=0.0, dropout=0.0, batch_size=32, embedding_dim=32, hidden_dim=48, epochs=15) if "old" in sys.argv else {}
for r in (64, 256):
    m = train_target("ner-bilstm-crf", insert_phrases(corpus, phrases, r), seed=0, progress=False, **OLD)
    d = d_exposure(m, PAPER_INSERTIONS, words)
    tokens, blank = template_tokens(DEFAULT_TEMPLATE)
    for cls, word in PAPER_INSERTIONS.items():
        ws = [w for w in words[cls] if w != word]
        probs = np.stack([p[blank] for p in m.token_label_probs([fill(tokens, w) for w in [word, *ws]])]).astype(np.float32)
        col = m.labels.index(f"B-{cls}")
        correct = probs.argmax(1) == col
        k_old = int(np.count_nonzero(correct[1:] & (probs[1:, col] >= probs[0, col])))
        old = np.log2(len(ws) + 1) - np.log2(1 + k_old) if correct[0] else 0.0
        p = d.per_class[cls]
        print(f"R={r} {cls}: new {p.value:.2f} bits (k={p.at_least}, ties {p.ties}, 1-conf=exp({p.log_complement:.1f}));"
              f" float32 ranking {old:.2f} bits (k={k_old}, float32 conf(s)={probs[0, col]!r}, words at 1.0: {int((probs[1:, col] == 1.0).sum())})")
