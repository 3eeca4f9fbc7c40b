import time, torch
torch.set_num_threads(1)
from pytest_privleak.data.synthetic_ner import generate_ner_like
from pytest_privleak.targets import train_target
d = generate_ner_like(n_train=1000, n_valid=100, n_test=100, seed=0)
print(len(d.train), sum(len(u.tokens) for u in d.train)/len(d.train))
for cfg in [dict(batch_size=10, embedding_dim=100, hidden_dim=100, dropout=0.5), dict(batch_size=32, embedding_dim=32, hidden_dim=48)]:
    t=time.time(); m = train_target("ner-bilstm-crf", d, seed=0, progress=False, epochs=2, **cfg); print(cfg, (time.time()-t)/2, "s/epoch")
