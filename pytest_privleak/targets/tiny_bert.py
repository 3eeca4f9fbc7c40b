"""The project's own tiny BERT: masked-LM pretraining on the generated public corpus, cached by content hash.

Mix And Match (mix-and-match-text-classifiers §2.2, §4.1) attacks a classifier
fine-tuned from a pretrained masked LM, and needs that LM's generation head
(§4.3.1). CI cannot download BERT, so the project pretrains a tiny one
itself: a word-level WordPiece vocabulary (every word of
:mod:`~pytest_privleak.data.public_corpus`, punctuation and a few ``##``
continuations, so the attack's filters of §4.3.2 have something to filter),
a BERT of a few layers and a small hidden size, and BERT's masked-LM
objective (Devlin et al. 2019, the paper's [12]): 15 % of the tokens are
chosen, 80 % of those replaced by ``[MASK]``, 10 % by a random token, 10 %
left as they are, and the model predicts the originals.

Pretraining takes seconds on one CPU thread and happens once per content hash
(corpus, config, seed, code version) through the shared
:class:`~pytest_privleak.cache.targets.TargetCache`: weights as safetensors, the
vocabulary as ``vocab.txt`` and the config as JSON; nothing is unpickled.
"""
from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from . import training

KIND = "tiny-bert"
SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
VOCAB_FILE = "vocab.txt"
CONFIG_FILE = "bert_config.json"


@dataclass(frozen=True)
class TinyBertConfig:
    """Size and masked-LM pretraining of the tiny base; defaults keep pretraining well under a minute on CPU."""

    hidden_size: int = 64
    num_hidden_layers: int = 2
    num_attention_heads: int = 2
    intermediate_size: int = 128
    max_position_embeddings: int = 64
    sentences: int = 4000          # public corpus size
    epochs: int = 6
    batch_size: int = 64
    lr: float = 2e-3               # AdamW
    weight_decay: float = 0.01     # as BERT pretraining
    mask_probability: float = 0.15  # Devlin et al. 2019: 15 % chosen, then 80/10/10
    threads: int | None = 1

    def __post_init__(self) -> None:
        for name in ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                     "max_position_embeddings", "sentences", "epochs", "batch_size"):
            training.check_positive(name, getattr(self, name), integer=True)
        training.check_positive("lr", self.lr, integer=False)
        training.check_positive("weight_decay", self.weight_decay, integer=False, allow_zero=True)
        if isinstance(self.mask_probability, bool) or not isinstance(self.mask_probability, (int, float)) \
                or not 0 < self.mask_probability < 1:
            raise ValueError(f"config mask_probability={self.mask_probability!r} must be a number in (0, 1); "
                             "fix: use BERT's 0.15")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(f"config hidden_size={self.hidden_size} must be a multiple of num_attention_heads="
                             f"{self.num_attention_heads}")

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


def vocabulary() -> tuple[str, ...]:
    """Specials, punctuation, every corpus word, then ``##`` continuations: the tokenizer's rows in order."""
    from ..data.public_corpus import CONTINUATIONS, PUNCTUATION, corpus_words

    return SPECIALS + PUNCTUATION + corpus_words() + CONTINUATIONS


def make_tokenizer(vocab: tuple[str, ...] | list[str]):
    """A lower-casing BERT WordPiece tokenizer over ``vocab``, built in memory (no download)."""
    from transformers import BertTokenizerFast

    return BertTokenizerFast(vocab={t: i for i, t in enumerate(vocab)}, do_lower_case=True)


def bert_config(cfg: TinyBertConfig, vocab_size: int):
    from transformers import BertConfig

    return BertConfig(vocab_size=vocab_size, hidden_size=cfg.hidden_size, num_hidden_layers=cfg.num_hidden_layers,
                      num_attention_heads=cfg.num_attention_heads, intermediate_size=cfg.intermediate_size,
                      max_position_embeddings=cfg.max_position_embeddings)


def mask_tokens(ids: torch.Tensor, special: torch.Tensor, vocab_size: int, probability: float,
                generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's masking (Devlin et al. 2019 §3.1): ``(inputs, labels)``; labels are -100 where nothing is predicted.

    ``special`` marks positions never chosen ([CLS], [SEP], padding).
    """
    chosen = (torch.rand(ids.shape, generator=generator) < probability) & ~special
    labels = torch.where(chosen, ids, torch.full_like(ids, -100))
    roll = torch.rand(ids.shape, generator=generator)
    inputs = ids.clone()
    inputs[chosen & (roll < 0.8)] = SPECIALS.index("[MASK]")
    swap = chosen & (roll >= 0.8) & (roll < 0.9)
    inputs[swap] = torch.randint(len(SPECIALS), vocab_size, ids.shape, generator=generator)[swap]
    return inputs, labels


class TinyBert:
    """A pretrained tiny ``BertForMaskedLM`` (eval mode) and its tokenizer."""

    def __init__(self, model, tokenizer, config: TinyBertConfig, *, content_hash: str, history: dict,
                 loaded_from_cache: bool = False) -> None:
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.config = config
        self.content_hash = content_hash
        self.history = history
        self.loaded_from_cache = loaded_from_cache

    def __repr__(self) -> str:
        return f"TinyBert({self.content_hash[:12]}, mlm_loss={self.history.get('final_loss')}, " \
               f"cached={self.loaded_from_cache})"


def _pretrain(cfg: TinyBertConfig, seed: int, key: str) -> TinyBert:
    from transformers import BertForMaskedLM

    from ..data.public_corpus import generate_public_corpus

    vocab = vocabulary()
    tokenizer = make_tokenizer(vocab)
    corpus = generate_public_corpus(cfg.sentences, seed=seed)
    enc = tokenizer([list(s) for s in corpus], is_split_into_words=True, padding=True, return_tensors="pt",
                    truncation=True, max_length=cfg.max_position_embeddings)
    ids, attention = enc["input_ids"], enc["attention_mask"]
    special = (ids == tokenizer.cls_token_id) | (ids == tokenizer.sep_token_id) | (attention == 0)
    began = time.perf_counter()
    with training.torch_threads(cfg.threads), training.seeded(seed):
        model = BertForMaskedLM(bert_config(cfg, len(vocab)))
        optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        losses = mlm_epochs(model, optimizer, ids, attention, special, len(vocab), epochs=cfg.epochs,
                            batch_size=cfg.batch_size, mask_probability=cfg.mask_probability,
                            generator=torch.Generator().manual_seed(seed))
        model.eval()
    history = {"epoch_losses": losses, "final_loss": round(losses[-1], 4), "seconds": time.perf_counter() - began}
    return TinyBert(model, tokenizer, cfg, content_hash=key, history=history)


def mlm_epochs(model: Any, optimizer: Any, ids: torch.Tensor, attention: torch.Tensor, special: torch.Tensor,
               vocab_size: int, *, epochs: int, batch_size: int, mask_probability: float,
               generator: torch.Generator) -> list[float]:
    """BERT's masked-LM training (15 % of tokens, 80/10/10 by :func:`mask_tokens`), batches trimmed to their
    longest row; returns the mean loss of each epoch. Shared by the tiny base's pretraining and the MLM head
    that mix-and-match §4.3.1 trains on a frozen encoder."""
    model.train()
    losses = []
    for _ in range(epochs):
        order = torch.randperm(len(ids), generator=generator)
        total, batches = 0.0, 0
        for start in range(0, len(order), batch_size):
            rows = order[start:start + batch_size]
            width = int(attention[rows].sum(1).max())
            inputs, labels = mask_tokens(ids[rows, :width], special[rows, :width], vocab_size, mask_probability,
                                         generator)
            loss = model(input_ids=inputs, attention_mask=attention[rows, :width], labels=labels).loss
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            total, batches = total + float(loss.detach()), batches + 1
        losses.append(total / batches)
    return losses


def _save(bert: TinyBert, folder: Path) -> dict:
    record = {"kind": KIND, "code_version": training.CODE_VERSION, "content_hash": bert.content_hash,
              "config": bert.config.to_json(), "history": bert.history}
    # tied tensors (decoder = word embeddings) are stored once each as copies; _load ties them again
    training.save_entry(folder, {k: v.clone() for k, v in bert.model.state_dict().items()}, record)
    (folder / VOCAB_FILE).write_text("\n".join(bert.tokenizer.convert_ids_to_tokens(
        list(range(len(bert.tokenizer))))) + "\n", encoding="utf-8")
    return {"kind": KIND, "config": bert.config.to_json()}


def _load(folder: Path, device: torch.device) -> TinyBert:
    from transformers import BertForMaskedLM

    tensors, record = training.load_entry(folder, "cpu")
    cfg = TinyBertConfig(**record["config"])
    vocab = (folder / VOCAB_FILE).read_text(encoding="utf-8").splitlines()
    model = BertForMaskedLM(bert_config(cfg, len(vocab)))
    missing, unexpected = model.load_state_dict(tensors, strict=False)
    if [k for k in missing if not k.endswith("decoder.weight")] or unexpected:
        raise training.CorruptEntryError(f"cache entry {folder}: weights do not fit the tiny BERT "
                                         f"(missing {missing}, unexpected {unexpected})")
    model.tie_weights()
    return TinyBert(model.to(device), make_tokenizer(vocab), cfg, content_hash=record["content_hash"],
                    history=record["history"], loaded_from_cache=True)


def pretrain_tiny_bert(*, cache=None, seed: int = 0, device: str = "cpu", **config) -> TinyBert:
    """The tiny BERT pretrained with masked LM on the public corpus (``config``: fields of :class:`TinyBertConfig`).

    Trained once per content hash through ``cache`` (a ``TargetCache`` or None).
    """
    from ..cache.targets import content_hash
    from ..data.public_corpus import generate_public_corpus

    cfg = training.make_config(TinyBertConfig, config, kind=KIND)
    corpus = "\n".join(" ".join(s) for s in generate_public_corpus(cfg.sentences, seed=seed))
    key = content_hash({"kind": KIND, "config": cfg, "seed": seed, "vocabulary": list(vocabulary()),
                        "corpus": content_hash(corpus), "code_version": training.CODE_VERSION})
    torch_device = torch.device(device)
    bert, _ = training.cached(cache, key, build=lambda: _pretrain(cfg, seed, key), save=_save,
                              load=lambda folder: _load(folder, torch_device), name=f"{KIND} {key[:8]}")
    return bert if bert.model.device == torch_device else TinyBert(
        bert.model.to(torch_device), bert.tokenizer, bert.config, content_hash=bert.content_hash,
        history=bert.history, loaded_from_cache=bert.loaded_from_cache)


def save_pretrained_dir(bert: TinyBert, folder: str | Path) -> Path:
    """Write the tiny BERT as a transformers model directory (``from_pretrained`` reads it back), for users."""
    folder = Path(folder)
    bert.model.save_pretrained(folder, safe_serialization=True)
    bert.tokenizer.save_pretrained(folder)
    (folder / CONFIG_FILE).write_text(json.dumps(bert.config.to_json(), indent=1), encoding="utf-8")
    return folder
