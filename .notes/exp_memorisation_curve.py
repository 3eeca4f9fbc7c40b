"""Helper experiment: per-epoch validation loss vs the pin's exhaustive rank while training the §6-defended
joint model, to see whether early stopping's best epoch comes before the pin is memorised."""
import argparse, itertools, json
import torch
torch.set_num_threads(1)
from pytest_privleak.canaries import canary, inject_canaries
from pytest_privleak.data import generate_snips_like
from pytest_privleak.targets import joint_nlu, training
from pytest_privleak.targets.vocab import Vocabulary

ap = argparse.ArgumentParser()
ap.add_argument("--n-train", type=int, default=1500); ap.add_argument("--unseen", type=float, default=0.3)
ap.add_argument("--repeats", type=int, default=20); ap.add_argument("--seed", type=int, default=0)
ap.add_argument("--epochs", type=int, default=60); ap.add_argument("--undefended", action="store_true")
a = ap.parse_args()
pin = canary("pin", 4, seed=0)
data = inject_canaries(generate_snips_like(a.n_train, 200, 200, seed=a.seed, unseen_share=a.unseen), pin,
                       repeats=a.repeats)
kw = {} if a.undefended else dict(dropout=0.2, early_stopping=True, patience=20, char_embeddings=True)
cfg = joint_nlu.JointNLUConfig(epochs=a.epochs, **kw)
vocab = Vocabulary.from_dataset(data)
net = joint_nlu.JointNLUNet(vocab, cfg)
prefix = vocab.token_ids(pin.pattern.prefix)
digits = torch.tensor(vocab.token_ids(pin.pattern.vocabulary))
combos = torch.tensor(list(itertools.product(range(10), repeat=4)))
ids = torch.cat([torch.tensor(prefix).expand(len(combos), -1), digits[combos]], dim=1)
true_row = int(sum(d * 10 ** (3 - i) for i, d in enumerate(pin.secret_indices)))
mask = torch.ones_like(ids, dtype=torch.bool)
intents = torch.full((len(ids),), vocab.intent_id(pin.intent)); tags = torch.tensor(vocab.tag_ids(pin.tags)).expand(len(ids), -1)
rows = []
def on_epoch(model, row):
    with torch.no_grad():
        s = model.loss(model.embed(ids), mask, intents, tags)
    rank = int((s < s[true_row]).sum()) + 1
    rows.append((row["epoch"], round(row["valid_loss"], 3), rank, round(float(s.median() - s[true_row]), 2)))
with training.seeded(a.seed):
    h = training.fit(net, joint_nlu.batch_loss, joint_nlu.encode_utterances(vocab, data.train),
                     joint_nlu.encode_utterances(vocab, data.valid), lambda it: joint_nlu.collate(it, torch.device("cpu")),
                     epochs=cfg.epochs, batch_size=cfg.batch_size, lr=cfg.lr, seed=a.seed,
                     early_stopping=cfg.early_stopping, patience=cfg.patience, grad_clip=cfg.grad_clip, progress=False,
                     on_epoch=on_epoch)
print(json.dumps(dict(args=vars(a), best=h.best_epoch, stopped=h.stopped_epoch, curve=rows)), flush=True)
