"""Benchmark of the transformers adapters: adapter time over a bare pass of the same model; one table, one run.

    python bench/bench_adapters.py [--device cpu|cuda] [--hidden 128] [--layers 2] [--batch 64] [--repeats 7]

Models are BERTs built from a config (no download) over a word-level
tokenizer written in memory. Rows (goal for each: ratio <= 1.2):

* ``loss_from_embeddings`` forward+backward (what the gradient CEA runs 250
  times): the adapter on an intent + slot pair vs the bare
  ``model(inputs_embeds=[CLS] x [SEP])`` + cross-entropy + gradient w.r.t. x;
* ``score`` (training loss of utterances, exposure and membership): the
  adapter from utterances vs bare forwards of pre-tokenised id tensors;
* masked LM pseudo-log-likelihood and causal LM log-perplexity: the adapter
  from utterances vs bare forwards of pre-built id tensors.

Adapter and bare runs alternate ``--repeats`` times and the median of the
per-pair ratios is printed, so load from other processes hits both sides alike.
The bare causal LM pass also sets ``use_cache=False``, as the adapter does, and
computes what the adapter computes: logits at every position but the last
(``logits_to_keep``) and ``log Pr(x_t)`` as the target's logit minus the
log-sum-exp of its row (no full log-softmax), so the ratio is the adapter's own
overhead (tokenising, padding, checks) and not a cheaper formula.
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import torch
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import timed  # noqa: E402
from helpers_transformers import bert_config, word_tokenizer  # noqa: E402

from pytest_privleak.adapters import from_transformers  # noqa: E402
from pytest_privleak.data.types import Utterance  # noqa: E402

WORDS = ["my", "pin", "code", "is", "call", "play", "a", "song", "by", "the", "book", "table", *"0123456789"]
INTENTS = ["PinIntent", "CallIntent", "PlayMusic"]
TAGS = ["O", "B-canary", "I-canary"]


def paired(device: str, repeats: int, adapter, bare) -> tuple[float, float, float]:
    """(median adapter seconds, median bare seconds, median of per-pair ratios), after one warm-up each."""
    adapter(), bare()
    a_times, b_times, ratios = [], [], []
    for _ in range(repeats):
        a, b = timed(device, adapter), timed(device, bare)
        a_times.append(a)
        b_times.append(b)
        ratios.append(a / b)
    return statistics.median(a_times), statistics.median(b_times), statistics.median(ratios)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--steps", type=int, default=20, help="forward+backward passes per timed run")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    from transformers import (BertForMaskedLM, BertForSequenceClassification, BertForTokenClassification,
                              GPT2Config, GPT2LMHeadModel)

    device, dev = args.device, torch.device(args.device)
    tokenizer = word_tokenizer(WORDS)
    size = dict(hidden_size=args.hidden, num_hidden_layers=args.layers, num_attention_heads=max(1, args.hidden // 32),
                intermediate_size=4 * args.hidden)
    intent = BertForSequenceClassification(bert_config(len(tokenizer), INTENTS, **size)).to(dev).eval()
    slots = BertForTokenClassification(bert_config(len(tokenizer), TAGS, **size)).to(dev).eval()
    adapter = from_transformers(intent, tokenizer, slot_model=slots)
    pin = Utterance("my pin code is 1 2 3 4".split(), ["O"] * 4 + ["B-canary"] + ["I-canary"] * 3, "PinIntent")
    rows = [Utterance(pin.tokens[:4] + tuple(str((i * 7 + k) % 10) for k in range(4)), pin.tags, pin.intent)
            for i in range(args.batch)]
    table = []

    # 1. loss_from_embeddings forward + backward (the gradient CEA's inner step)
    width = adapter.input_embeddings().shape[1]
    x = torch.randn(args.batch, len(pin.tokens), width, device=dev).requires_grad_(True)
    intents, tags = [pin.intent] * args.batch, [pin.tags] * args.batch

    def adapter_step():
        for _ in range(args.steps):
            torch.autograd.grad(adapter.loss_from_embeddings(x, intents, tags).sum(), [x])

    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    intent_id = torch.full((args.batch,), intent.config.label2id[pin.intent], device=dev)
    tag_ids = torch.tensor([[slots.config.label2id[t] for t in pin.tags]] * args.batch, device=dev)
    frames = [(m.get_input_embeddings().weight[cls].detach(), m.get_input_embeddings().weight[sep].detach())
              for m in (intent, slots)]
    half = args.hidden

    def bare_step():
        for _ in range(args.steps):
            parts = []
            for (c, s), part in zip(frames, (x[..., :half], x[..., half:])):
                parts.append(torch.cat([c.expand(args.batch, 1, -1), part, s.expand(args.batch, 1, -1)], 1))
            loss = F.cross_entropy(intent(inputs_embeds=parts[0]).logits, intent_id, reduction="sum")
            logits = slots(inputs_embeds=parts[1]).logits[:, 1:-1]
            loss = loss + F.cross_entropy(logits.transpose(1, 2), tag_ids, reduction="none").mean(1).sum()
            torch.autograd.grad(loss, [x])

    table.append(("loss_from_embeddings fwd+bwd (pair)", *paired(device, args.repeats, adapter_step, bare_step)))

    # 2. score(): training loss of utterances vs forwards of pre-tokenised ids
    ids = torch.tensor([[cls] + tokenizer.convert_tokens_to_ids(list(u.tokens)) + [sep] for u in rows], device=dev)
    full_tags = F.pad(tag_ids, (1, 1), value=-100)

    def adapter_score():
        for _ in range(args.steps):
            adapter.score(rows)

    @torch.no_grad()
    def bare_score():
        for _ in range(args.steps):
            ce = F.cross_entropy(intent(input_ids=ids).logits, intent_id, reduction="none")
            logits = slots(input_ids=ids).logits
            (ce + F.cross_entropy(logits.transpose(1, 2), full_tags, reduction="none").sum(1) / 8).cpu().numpy()

    table.append(("score (pair, training loss)", *paired(device, args.repeats, adapter_score, bare_score)))

    # 3. masked LM pseudo-log-likelihood
    mlm = BertForMaskedLM(bert_config(len(tokenizer), ["x"], **size)).to(dev).eval()
    mlm_scorer = from_transformers(mlm, tokenizer, batch_size=len(rows) * 8)
    lm_rows = rows[: max(1, args.batch // 8)]
    lm_ids = torch.tensor([[cls] + tokenizer.convert_tokens_to_ids(list(u.tokens)) + [sep] for u in lm_rows],
                          device=dev)
    n, length = lm_ids.shape
    which = torch.arange(1, length - 1, device=dev).repeat(n)
    copies = lm_ids.repeat_interleave(length - 2, dim=0)
    truth = copies[torch.arange(copies.shape[0], device=dev), which].clone()
    copies[torch.arange(copies.shape[0], device=dev), which] = tokenizer.mask_token_id

    def adapter_mlm():
        for _ in range(args.steps):
            mlm_scorer.score(lm_rows)

    @torch.no_grad()
    def bare_mlm():
        for _ in range(args.steps):
            logits = mlm(input_ids=copies).logits[torch.arange(copies.shape[0], device=dev), which]
            torch.log_softmax(logits.float(), -1).gather(-1, truth.unsqueeze(-1)).view(n, -1).sum(1).cpu().numpy()

    table.append(("masked LM pseudo-log-likelihood", *paired(device, args.repeats, adapter_mlm, bare_mlm)))

    # 4. causal LM log-perplexity
    gpt = GPT2LMHeadModel(GPT2Config(vocab_size=len(tokenizer), n_positions=64, n_embd=args.hidden,
                                     n_layer=args.layers, n_head=max(1, args.hidden // 32),
                                     bos_token_id=cls)).to(dev).eval()
    gpt_scorer = from_transformers(gpt, tokenizer, batch_size=len(rows))

    def adapter_gpt():
        for _ in range(args.steps):
            gpt_scorer.score(rows)

    keep = torch.arange(ids.shape[1] - 1, device=dev)   # no logits for the last position, as the adapter

    @torch.no_grad()
    def bare_gpt():
        for _ in range(args.steps):
            logits = gpt(input_ids=ids, use_cache=False, logits_to_keep=keep).logits.float()
            logp = logits.gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1) - torch.logsumexp(logits, -1)
            logp.sum(1).cpu().numpy()

    table.append(("causal LM log-perplexity", *paired(device, args.repeats, adapter_gpt, bare_gpt)))

    print(f"device {device}, BERT hidden {args.hidden} x {args.layers} layers, batch {args.batch}, "
          f"{args.steps} passes per run, median of {args.repeats} alternating pairs, torch threads {args.threads}")
    print(f"{'row':<38} {'adapter s':>10} {'bare s':>10} {'ratio':>7}  goal <= 1.2")
    for name, a, b, ratio in table:
        print(f"{name:<38} {a:>10.4f} {b:>10.4f} {ratio:>7.3f}  {'ok' if ratio <= 1.2 else 'OVER'}")


if __name__ == "__main__":
    main()
