"""Issue 24 item 1: exposure of a pin written as one string ("my pin is 4821") through a word-piece tokenizer."""
import sys, time
sys.path.insert(0, "/work/main/tests")
import torch
torch.set_num_threads(1)
from helpers_transformers import bert_config, dataset_words, word_tokenizer, fine_tune
from transformers import BertForSequenceClassification, BertTokenizerFast
from pytest_privleak.data.synthetic import generate_snips_like
from pytest_privleak.canaries import string_pattern, canary, inject_canaries
from pytest_privleak.adapters import from_transformers
from pytest_privleak.attacks.exposure import compute_exposure

data = generate_snips_like(seed=0)
pat = string_pattern("pin-string", "my pin is ####", intent="PinIntent")
said, never = canary(pat, secret="4821"), canary(pat, secret="7306")
inj = inject_canaries(data, said, repeats=int(sys.argv[1]) if len(sys.argv) > 1 else 20)
words = sorted(set(dataset_words(inj)) - {f"{n:04d}" for n in range(10000)})
pieces = [f"{n:02d}" for n in range(100)] + [f"##{n:02d}" for n in range(100)]
vocab = list(dict.fromkeys(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words + pieces))
tok = BertTokenizerFast(vocab={t: i for i, t in enumerate(vocab)}, do_lower_case=True)
print("pieces of 4821:", tok.tokenize("4821"))
intents = sorted({u.intent for u in inj.train})
torch.manual_seed(0)
model = BertForSequenceClassification(bert_config(len(tok), intents))
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 300
t = time.time()
fine_tune([model], tok, list(inj.train), steps=steps, lr=3e-3)
print(f"trained {steps} steps in {time.time()-t:.1f}s")
adapter = from_transformers(model, tok)
for c in (said, never):
    t = time.time()
    e = compute_exposure(adapter, c)
    print(c.text, "exposure", round(e.value, 2), "rank", e.rank, "of", e.space_size, f"{time.time()-t:.1f}s")
