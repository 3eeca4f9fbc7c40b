import sys, time, numpy as np, torch
from torch import nn
from torch.nn import functional as F
from pytest_privleak.data.synthetic import generate_snips_like
torch.set_num_threads(1)
t=time.time()
corpus = generate_snips_like(n_train=4000, n_valid=10, n_test=10, seed=3, unseen_share=0.5)
pool = list(dict.fromkeys(corpus.train))
import random; random.Random(0).shuffle(pool)
print(len(pool), time.time()-t)
noise = float(sys.argv[3]) if len(sys.argv)>3 else 0.0
rng = random.Random(1); ints = sorted({u.intent for u in pool})
pool = [u.__class__(u.tokens, u.tags, rng.choice(ints)) if rng.random() < noise else u for u in pool]
NM = int(sys.argv[4]) if len(sys.argv)>4 else 400
members, non = pool[:NM], pool[NM:NM+1000]
words = sorted({w for u in pool for w in u.tokens}); wid = {w:i+1 for i,w in enumerate(words)}
intents = sorted({u.intent for u in pool}); iid={k:i for i,k in enumerate(intents)}
class BagMLP(nn.Module):
    def __init__(self, v, c, d=64):
        super().__init__(); self.emb = nn.EmbeddingBag(v, d, mode="mean"); self.mlp = nn.Sequential(nn.Linear(d, 128), nn.ReLU(), nn.Linear(128, c))
    def forward(self, ids, offsets): return self.mlp(self.emb(ids, offsets))
def batch(us):
    ids = [torch.tensor([wid[w] for w in u.tokens]) for u in us]
    offsets = torch.tensor([0]+[len(x) for x in ids[:-1]]).cumsum(0)
    return torch.cat(ids), offsets, torch.tensor([iid[u.intent] for u in us])
SEED=int(sys.argv[5]) if len(sys.argv)>5 else 0
torch.manual_seed(SEED)
model = BagMLP(len(words)+1, len(intents))
opt = torch.optim.Adam(model.parameters(), lr=float(sys.argv[1]) if len(sys.argv)>1 else 1e-2)
ids, off, y = batch(members)
for ep in range(int(sys.argv[2]) if len(sys.argv)>2 else 100):
    perm = torch.randperm(len(members))
    for s in range(0, len(members), 32):
        b = perm[s:s+32]; bm=[members[i] for i in b]
        i2,o2,y2 = batch(bm)
        loss = F.cross_entropy(model(i2,o2), y2); opt.zero_grad(); loss.backward(); opt.step()
model.eval()
with torch.no_grad():
    for name, us in (("members", members), ("non", non)):
        i2,o2,y2 = batch(us); lg = model(i2,o2)
        l32 = F.cross_entropy(lg, y2, reduction="none"); l64 = F.cross_entropy(lg.double(), y2, reduction="none")
        print(name, "zeros32", (l32==0).float().mean().item(), "zeros64", (l64==0).float().mean().item(), "acc", (lg.argmax(1)==y2).float().mean().item())
print(time.time()-t)
from pytest_privleak.attacks.membership.attack import membership_inference
class Scorer:
    def __init__(self, model, dtype): self.model, self.dtype = model, dtype
    def score(self, us):
        with torch.no_grad():
            i2,o2,y2 = batch(us)
            if self.dtype == "exact": return cross_entropy64(self.model(i2,o2), y2).numpy()
            return F.cross_entropy(self.model(i2,o2).to(self.dtype), y2, reduction="none").numpy()
import warnings
from pytest_privleak.adapters import cross_entropy64
for dt in (torch.float32, torch.float64, 'exact'):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        m = membership_inference(Scorer(model, dt), members, non, method="loss")
    print(sys.argv[1:], str(dt)[-7:], round(m.auc,3), [(p.fpr, p.measurable, p.tpr, p.achieved_fpr) for p in m.points], len(w))
