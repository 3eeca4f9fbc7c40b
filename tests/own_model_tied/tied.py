"""A tiny GPT-2 written from the transformers docs (``GPT2Config``: input and output embeddings tied, GPT-2's
default), a word-level tokenizer, and the team's own training loop; plus a module whose state the cache cannot
store (an extra-state object), for the refusal before training."""
from __future__ import annotations

import torch
from torch import nn

CALLS = {"train": 0, "untrainable": 0}
SPECIALS = ["<pad>", "<unk>", "<s>", "</s>"]


def make_tokenizer():
    """A lower-casing word-level tokenizer over the bundled corpus's words, the pin prompt and the digits."""
    from tokenizers import Tokenizer, normalizers, pre_tokenizers
    from tokenizers.models import WordLevel
    from transformers import PreTrainedTokenizerFast

    from pytest_privleak.data.synthetic import generate_snips_like

    corpus = generate_snips_like(n_train=3000, n_valid=0, n_test=0, seed=3)
    words = sorted({t.lower() for u in corpus.train for t in u.tokens} | {"my", "pin", "code", "is"}
                   | {str(d) for d in range(10)})
    core = Tokenizer(WordLevel({t: i for i, t in enumerate(SPECIALS + words)}, unk_token="<unk>"))
    core.normalizer = normalizers.Lowercase()
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", unk_token="<unk>", bos_token="<s>",
                                   eos_token="</s>")


TOKENIZER = make_tokenizer()


def build(dataset):
    from transformers import GPT2Config, GPT2LMHeadModel

    tokenizer = TOKENIZER
    config = GPT2Config(vocab_size=len(tokenizer), n_positions=32, n_embd=48, n_layer=2, n_head=2,
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=tokenizer.bos_token_id,
                        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    return GPT2LMHeadModel(config)


def train(dataset, seed: int = 0, epochs: int = 30, lr: float = 3e-3):
    """Plain next-token training on ``<s> utterance </s>``, Adam, batches of 32."""
    CALLS["train"] += 1
    torch.manual_seed(seed)
    tokenizer = TOKENIZER
    model = build(dataset)
    rows = [[tokenizer.bos_token_id] + tokenizer(" ".join(u.tokens))["input_ids"] + [tokenizer.eos_token_id]
            for u in dataset.train]
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), tokenizer.pad_token_id)
    labels = torch.full((len(rows), width), -100)
    for i, r in enumerate(rows):
        ids[i, :len(r)] = torch.tensor(r)
        labels[i, :len(r)] = torch.tensor(r)
    attention = (labels != -100).long()
    optimiser = torch.optim.Adam(model.parameters(), lr=lr)
    draw = torch.Generator().manual_seed(seed)
    model.train()
    for _ in range(epochs):
        for batch in torch.randperm(len(rows), generator=draw).split(32):
            loss = model(input_ids=ids[batch], attention_mask=attention[batch], labels=labels[batch]).loss
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
    return model.eval()


def as_causal_lm(model):
    """What the team hands the attacks: the transformers causal-LM adapter (a scorer holding model and tokenizer)."""
    from pytest_privleak.adapters import from_transformers

    return from_transformers(model, TOKENIZER)


class WithState(nn.Module):
    """A module carrying a Python object in its state dict (``get_extra_state``): safetensors cannot write it."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(2, 2)

    def get_extra_state(self):
        return {"vocabulary": ["a", "b"]}

    def set_extra_state(self, state) -> None:
        self.vocabulary = state["vocabulary"]


def untrainable_build(dataset):
    return WithState()


def untrainable_train(dataset, seed: int = 0):
    CALLS["untrainable"] += 1
    return WithState()


class TiedBag(nn.Module):
    """A word-embedding table that is also the output layer (tied), and a slice of it kept as its own buffer view."""

    def __init__(self, words: int = 12, dim: int = 4) -> None:
        super().__init__()
        self.embedding = nn.Embedding(words, dim)
        self.output = nn.Linear(dim, words, bias=False)
        self.output.weight = self.embedding.weight           # tied: one tensor, two names


def tied_bag(dataset):
    return TiedBag()


def train_tied_bag(dataset, seed: int = 0, steps: int = 5):
    CALLS["train"] += 1
    torch.manual_seed(seed)
    model = TiedBag()
    optimiser = torch.optim.Adam(model.parameters(), lr=1e-2)
    words = torch.arange(12)
    for _ in range(steps):
        loss = nn.functional.cross_entropy(model.output(model.embedding(words)), words)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    return model
