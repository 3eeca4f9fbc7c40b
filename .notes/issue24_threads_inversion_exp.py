"""Issue 24 item 6: do embedding inversion's figures move with torch's thread count (bitwise)? Tiny encoder of
tests/test_embeddings_inversion.py, its CI budget, citizen-id pattern, at 1, 2 and 4 threads."""
import json
import sys

import torch

sys.path.insert(0, "tests")
from test_embeddings_inversion import BUDGET, tiny_encoder  # noqa: E402
from pytest_privleak.embeddings.inversion import invert_embeddings  # noqa: E402
from pytest_privleak.embeddings.inversion_assertion import _results  # noqa: E402

encoder = tiny_encoder(seed=0)
out = {}
for threads in (1, 2, 4):
    torch.set_num_threads(threads)
    m = invert_embeddings(encoder, "citizen-id", confidence=0.95, sub_attacks=None, **BUDGET)
    out[threads] = [json.dumps(r.to_json(), sort_keys=True) for r in _results(encoder, m, with_top5=True, name=None)]
    print(threads, [json.loads(r)["value"] for r in out[threads]], flush=True)
for t in (2, 4):
    print(f"1 against {t} threads: bitwise equal:", out[1] == out[t])
