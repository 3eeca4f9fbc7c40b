"""A tiny GPT-2 built from a config and a word-level tokenizer written locally (no download), for the
generation and extraction tests: a few hundred Adam steps on a small corpus make a secret said many
times the model's most likely continuation of its prefix.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch

BOS = "<|endoftext|>"
SPECIALS = [BOS, "[UNK]", "[PAD]"]


def word_tokenizer(words: Sequence[str]):
    """A whitespace word-level tokenizer over ``words``; ``<|endoftext|>`` is BOS and EOS, ``[UNK]`` unknown."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {t: i for i, t in enumerate(SPECIALS + sorted(set(words) - set(SPECIALS)))}
    raw = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    raw.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=raw, bos_token=BOS, eos_token=BOS, unk_token="[UNK]",
                                   pad_token="[PAD]")


def tiny_gpt2(vocab_size: int, *, seed: int = 0, positions: int = 48):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    config = GPT2Config(vocab_size=vocab_size, n_positions=positions, n_embd=48, n_layer=2, n_head=2,
                        bos_token_id=0, eos_token_id=0, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    return GPT2LMHeadModel(config)


def train_causal(model, tokenizer, texts: Sequence[str], *, steps: int, seed: int = 0, lr: float = 3e-3,
                 batch: int = 32):
    """``steps`` Adam steps of the causal LM loss on ``<bos> text <eos>`` rows drawn with ``seed``; eval mode after."""
    torch.manual_seed(seed)
    bos = tokenizer.bos_token_id
    rows = [[bos] + tokenizer(t, add_special_tokens=False)["input_ids"] + [bos] for t in texts]
    width = max(len(r) for r in rows)
    ids = torch.tensor([r + [tokenizer.pad_token_id] * (width - len(r)) for r in rows])
    mask = (torch.arange(width) < torch.tensor([len(r) for r in rows]).unsqueeze(1)).long()
    labels = ids.masked_fill(mask == 0, -100)
    generator = torch.Generator().manual_seed(seed)
    optimiser = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    for _ in range(steps):
        pick = torch.randint(0, len(rows), (batch,), generator=generator)
        loss = model(input_ids=ids[pick], attention_mask=mask[pick], labels=labels[pick]).loss
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    return model.eval()


def corpus_texts(dataset) -> list[str]:
    return [" ".join(u.tokens) for u in dataset.train]


def trained_gpt2(dataset, *, steps: int = 300, seed: int = 0, extra_words: Sequence[str] = ()):
    """(model, tokenizer) of a tiny GPT-2 trained ``steps`` steps on ``dataset.train``'s texts."""
    texts = corpus_texts(dataset)
    words = {w for t in texts for w in t.split()} | set(extra_words) | set("0123456789")
    tokenizer = word_tokenizer(sorted(words))
    model = tiny_gpt2(len(tokenizer), seed=seed)
    return train_causal(model, tokenizer, texts, steps=steps, seed=seed), tokenizer
