"""A tiny GPT-2 built from a config and a word-level tokenizer written locally (no download), for the
generation and extraction tests: a few hundred Adam steps on a small corpus make a secret said many
times the model's most likely continuation of its prefix.
"""
from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

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


#: Records a leaking model is trained on many times (untargeted extraction), and ones it never sees (control).
RECORDS = ("patient alice moreau was admitted with acute asthma on march third",
           "card holder bob keane lives at twelve harbour road in leeds")
UNSEEN_RECORDS = ("patient carl ortiz was admitted with a broken wrist on june ninth",
                  "card holder dana pike lives at four mill lane in york")


def record_words() -> tuple[str, ...]:
    return tuple(sorted({w for t in RECORDS + UNSEEN_RECORDS for w in t.split()}))


@lru_cache(maxsize=None)
def leaky_corpus(repeats: int = 20):
    """Snips-like corpus + a pin canary said ``repeats`` times + :data:`RECORDS` said ``repeats`` times each.

    Returns ``(dataset, pin, unseen_pin)``: ``unseen_pin`` is a canary of the same pattern never said.
    """
    from pytest_privleak.canaries import canary, inject_canaries
    from pytest_privleak.data.synthetic import generate_snips_like
    from pytest_privleak.data.types import Utterance

    pin, unseen = canary("pin", 4, seed=3), canary("pin", 4, seed=7)
    base = inject_canaries(generate_snips_like(n_train=240, n_valid=20, n_test=0, seed=1), pin, repeats=repeats)
    notes = tuple(Utterance(tuple(t.split()), ("O",) * len(t.split()), "Note") for t in RECORDS
                  for _ in range(repeats))
    data = type(base)(base.train + notes, base.valid, base.test, name=base.name + "+records",
                      canary_tokens=base.canary_tokens)
    return data, pin, unseen


@lru_cache(maxsize=None)
def leaky_gpt2(steps: int = 250):
    """A tiny GPT-2 (and tokenizer) trained on :func:`leaky_corpus`; shared by the test modules of one process."""
    torch.set_num_threads(1)
    data, _, _ = leaky_corpus()
    return trained_gpt2(data, steps=steps, extra_words=record_words())


@lru_cache(maxsize=None)
def leaky_lstm(epochs: int = 4):
    """The built-in lstm-lm target trained on :func:`leaky_corpus` (no cache)."""
    from pytest_privleak.targets import train_target

    data, _, _ = leaky_corpus()
    return train_target("lstm-lm", data, seed=0, progress=False, epochs=epochs, extra_tokens=record_words())
