"""Tiny transformers models built from a config, and a word-level tokenizer written locally (no download).

Used by the adapter, membership and bad-input tests: a BERT with 2 layers and
hidden size 32 fine-tuned for a few steps, and a hand-written wrapper of the
same model that the adapter's figures are compared with.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch.nn import functional as F

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
#: pieces that make 'colour' two word pieces (col ##our) in the test tokenizer
EXTRA_PIECES = ["col", "##our", "##s"]


def word_tokenizer(words: Sequence[str]):
    """A BERT WordPiece tokenizer over ``words`` (lower-casing), built in memory."""
    from transformers import BertTokenizerFast

    vocab = SPECIALS + sorted(set(words) - set(SPECIALS)) + EXTRA_PIECES
    return BertTokenizerFast(vocab={t: i for i, t in enumerate(vocab)}, do_lower_case=True)


def bert_config(vocab_size: int, labels: Sequence[str], **overrides):
    from transformers import BertConfig

    options = dict(vocab_size=vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                   intermediate_size=64, max_position_embeddings=64, hidden_dropout_prob=0.1,
                   attention_probs_dropout_prob=0.1, id2label=dict(enumerate(labels)),
                   label2id={k: i for i, k in enumerate(labels)})
    options.update(overrides)
    return BertConfig(**options)


def dataset_words(dataset, extra: Sequence[str] = ()) -> list[str]:
    words = {t.lower() for split in (dataset.train, dataset.valid, dataset.test) for u in split for t in u.tokens}
    return sorted(words | {w.lower() for w in extra})


def tiny_pair(dataset, tokenizer, *, seed: int = 0):
    """Untrained (sequence classifier, token classifier) over the dataset's intents and tags."""
    from transformers import BertForSequenceClassification, BertForTokenClassification

    torch.manual_seed(seed)
    intents = sorted({u.intent for u in dataset.train})
    tags = sorted({t for u in dataset.train for t in u.tags})
    intent_model = BertForSequenceClassification(bert_config(len(tokenizer), intents))
    slot_model = BertForTokenClassification(bert_config(len(tokenizer), tags))
    return intent_model, slot_model


def fine_tune(models, tokenizer, utterances, *, steps: int, seed: int = 0, lr: float = 3e-3, batch: int = 32):
    """A few Adam steps of the models' own training losses on ``utterances`` (then eval mode)."""
    torch.manual_seed(seed)
    enc = tokenizer([list(u.tokens) for u in utterances], is_split_into_words=True, padding=True,
                    return_tensors="pt")
    for model in models:
        optimiser = torch.optim.Adam(model.parameters(), lr=lr)
        label2id = model.config.label2id
        if "ForTokenClassification" in type(model).__name__:
            labels = torch.full(enc["input_ids"].shape, -100, dtype=torch.long)
            for i, u in enumerate(utterances):
                words = enc.word_ids(i)
                for p, w in enumerate(words):
                    if w is not None and (p == 0 or words[p - 1] != w):
                        labels[i, p] = label2id[u.tags[w]]
        else:
            labels = torch.tensor([label2id[u.intent] for u in utterances])
        generator = torch.Generator().manual_seed(seed)
        model.train()
        for step in range(steps):
            rows = torch.randint(0, len(utterances), (batch,), generator=generator)
            out = model(input_ids=enc["input_ids"][rows], attention_mask=enc["attention_mask"][rows],
                        labels=labels[rows])
            optimiser.zero_grad()
            out.loss.backward()
            optimiser.step()
        model.eval()
    return models


class HandWrittenPair:
    """What a user would write by hand for a BERT intent + slot pair: the reference for the adapter.

    Vocabulary: every piece of the tokenizer (the attack only looks up the
    canary's tokens). Loss: intent cross-entropy + mean tag cross-entropy over
    the words, on ``[CLS] rows [SEP]``. ``score`` runs utterances of one length
    together through the embedding rows of their pieces (no padding).
    """

    def __init__(self, intent_model, slot_model, tokenizer):
        self.intent_model, self.slot_model, self.tokenizer = intent_model, slot_model, tokenizer
        self.vocabulary = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
        self.cls, self.sep = tokenizer.cls_token_id, tokenizer.sep_token_id

    def input_embeddings(self):
        return torch.cat([self.intent_model.get_input_embeddings().weight.detach(),
                          self.slot_model.get_input_embeddings().weight.detach()], dim=-1)

    def _loss(self, rows_intent, rows_slot, intents, tags):
        mask = torch.ones(rows_intent.shape[:2], dtype=torch.long)
        intent_logits = self.intent_model(inputs_embeds=rows_intent, attention_mask=mask).logits
        slot_logits = self.slot_model(inputs_embeds=rows_slot, attention_mask=mask).logits[:, 1:-1]
        intent_ids = torch.tensor([self.intent_model.config.label2id[i] for i in intents])
        tag_ids = torch.tensor([[self.slot_model.config.label2id[t] for t in row] for row in tags])
        slot_ce = F.cross_entropy(slot_logits.float().transpose(1, 2), tag_ids, reduction="none").mean(dim=1)
        return F.cross_entropy(intent_logits.float(), intent_ids, reduction="none") + slot_ce

    def loss_from_embeddings(self, embeddings, intents, tags):
        d = self.intent_model.config.hidden_size
        framed = []
        for model, part in ((self.intent_model, embeddings[..., :d]), (self.slot_model, embeddings[..., d:])):
            table = model.get_input_embeddings().weight.detach()
            b = part.shape[0]
            framed.append(torch.cat([table[self.cls].expand(b, 1, -1), part, table[self.sep].expand(b, 1, -1)], 1))
        return self._loss(framed[0], framed[1], intents, tags)

    @torch.no_grad()
    def score(self, utterances):
        out = np.empty(len(utterances))
        by_length: dict[int, list[int]] = {}
        for i, u in enumerate(utterances):       # same length together: no padding needed
            by_length.setdefault(len(u.tokens), []).append(i)
        for rows in by_length.values():
            ids = torch.tensor([[self.cls] + self.tokenizer.convert_tokens_to_ids(list(utterances[i].tokens))
                                + [self.sep] for i in rows])
            embeds = [m.get_input_embeddings()(ids) for m in (self.intent_model, self.slot_model)]
            loss = self._loss(embeds[0], embeds[1], [utterances[i].intent for i in rows],
                              [utterances[i].tags for i in rows])
            out[rows] = loss.double().numpy()
        return out
