"""The project's own tiny GPT-2: causal-LM pretraining on the generated public corpus, cached by content hash.

The Secret Sharer setting (exposure, quoted as eq. 1 of
d-exposure-discriminative §2) and the PII studies of fine-tuned GPT-2 start
from a causal language model pretrained on public text, then fine-tuned on
private data. CI cannot download GPT-2, so the project pretrains a tiny one
itself, as it does its tiny BERT (:mod:`.tiny_bert`): a word-level
vocabulary (every word of
:func:`~pytest_privleak.data.public_corpus.generate_causal_public_corpus`,
punctuation, and every built-in canary pattern's tokens), a
``GPT2LMHeadModel`` built from a ``GPT2Config`` (a few layers, a small
hidden size, no dropout) and the causal-LM objective: each sentence is
``<s> w_1 .. w_n </s>`` and the model predicts every token after ``<s>``.

The tokenizer is a ``PreTrainedTokenizerFast`` over a ``WordLevel`` model
(lower-casing, split on whitespace) built in memory; like GPT-2's it adds no
special tokens itself, so a prompt encodes to its words and the causal-LM
adapter puts ``<s>`` in front when it scores.

Pretraining takes seconds on one CPU thread and happens once per content hash
(corpus, config, vocabulary, seed, code version) through the shared
:class:`~pytest_privleak.cache.targets.TargetCache`, stored with
``save_pretrained`` (safetensors and JSON, nothing unpickled).
"""
from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from . import training

KIND = "tiny-gpt2"
PAD, UNK, BOS, EOS = "<pad>", "<unk>", "<s>", "</s>"
SPECIALS = (PAD, UNK, BOS, EOS)
RECORD_FILE = "target.json"


@dataclass(frozen=True)
class TinyGPT2Config:
    """Size and pretraining of the tiny causal base; defaults pretrain in well under a minute on one CPU thread."""

    n_embd: int = 64
    n_layer: int = 2
    n_head: int = 2
    n_positions: int = 64
    sentences: int = 4000          # public corpus size
    epochs: int = 4
    batch_size: int = 64
    lr: float = 3e-3               # AdamW
    weight_decay: float = 0.01     # as GPT-2 pretraining
    threads: int | None = 1

    def __post_init__(self) -> None:
        for name in ("n_embd", "n_layer", "n_head", "n_positions", "sentences", "epochs", "batch_size"):
            training.check_positive(name, getattr(self, name), integer=True)
        training.check_positive("lr", self.lr, integer=False)
        training.check_positive("weight_decay", self.weight_decay, integer=False, allow_zero=True)
        if self.n_embd % self.n_head:
            raise ValueError(f"config n_embd={self.n_embd} must be a multiple of n_head={self.n_head}")

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


def canary_words() -> tuple[str, ...]:
    """Prefix and V0 tokens of every built-in canary pattern, lower-cased: each needs its own row."""
    from ..canaries import PATTERNS

    return tuple(sorted({t.lower() for p in PATTERNS.values() for t in (*p.prefix, *p.vocabulary)}))


def vocabulary() -> tuple[str, ...]:
    """Specials, punctuation, then every corpus or canary word (sorted): the tokenizer's rows in order."""
    from ..data.public_corpus import PUNCTUATION, causal_corpus_words

    words = sorted(set(causal_corpus_words()) | set(canary_words()))
    return SPECIALS + PUNCTUATION + tuple(w for w in words if w not in PUNCTUATION)


def make_tokenizer(vocab: Sequence[str]):
    """A lower-casing word-level fast tokenizer over ``vocab`` (no download); it adds no special tokens."""
    from tokenizers import Tokenizer, normalizers, pre_tokenizers
    from tokenizers.models import WordLevel
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(WordLevel({t: i for i, t in enumerate(vocab)}, unk_token=UNK))
    core.normalizer = normalizers.Lowercase()
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=core, pad_token=PAD, unk_token=UNK, bos_token=BOS,
                                   eos_token=EOS)


def gpt2_config(cfg: TinyGPT2Config, tokenizer: Any):
    """A ``GPT2Config`` of ``cfg``'s size over ``tokenizer``'s rows, without dropout (the paper's plain model)."""
    from transformers import GPT2Config

    return GPT2Config(vocab_size=len(tokenizer), n_positions=cfg.n_positions, n_embd=cfg.n_embd,
                      n_layer=cfg.n_layer, n_head=cfg.n_head, n_inner=4 * cfg.n_embd, resid_pdrop=0.0,
                      activation_function="gelu_pytorch_tanh",  # GPT-2's gelu_new, as one torch kernel
                      embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=tokenizer.bos_token_id,
                      eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)


def encode_sentences(tokenizer: Any, sentences: Sequence[Sequence[str]], max_length: int
                     ) -> tuple[torch.Tensor, torch.Tensor]:
    """``<s> w_1 .. w_n </s>`` of each sentence, right-padded: ``(ids [N, L], attention [N, L])``.

    Sentences longer than ``max_length`` pieces (with ``<s>`` and ``</s>``) are cut to it.
    """
    rows = tokenizer([list(s) for s in sentences], is_split_into_words=True, add_special_tokens=False)["input_ids"]
    rows = [([tokenizer.bos_token_id] + list(r) + [tokenizer.eos_token_id])[:max_length] for r in rows]
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), tokenizer.pad_token_id, dtype=torch.long)
    attention = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, :len(r)] = torch.tensor(r, dtype=torch.long)
        attention[i, :len(r)] = 1
    return ids, attention


def sentence_nll(model: Any, ids: torch.Tensor, attention: torch.Tensor) -> torch.Tensor:
    """Summed negative log-likelihood (nats) ``[B]`` of every token after ``<s>``, padding excluded.

    The batch is trimmed to its longest row first (rows are right-padded).
    """
    width = int(attention.sum(1).max())
    ids, attention = ids[:, :width], attention[:, :width]
    logits = model(input_ids=ids, attention_mask=attention, use_cache=False).logits[:, :-1].float()
    targets = ids[:, 1:]
    nll = torch.logsumexp(logits, -1) - logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    return (nll * attention[:, 1:]).sum(1)


def lm_epochs(model: Any, optimizer: Any, ids: torch.Tensor, attention: torch.Tensor, *, epochs: int,
              batch_size: int, generator: torch.Generator) -> list[float]:
    """Causal-LM pretraining: mean per-token cross-entropy of each batch; returns each epoch's mean loss."""
    model.train()
    losses = []
    for _ in range(epochs):
        order = torch.randperm(len(ids), generator=generator)
        total, batches = 0.0, 0
        for start in range(0, len(order), batch_size):
            rows = order[start:start + batch_size]
            loss = sentence_nll(model, ids[rows], attention[rows]).sum() / (attention[rows, 1:].sum())
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            total, batches = total + float(loss.detach()), batches + 1
        losses.append(total / batches)
    model.eval()
    return losses


class TinyGPT2:
    """A pretrained tiny ``GPT2LMHeadModel`` (eval mode) and its word-level tokenizer."""

    def __init__(self, model: Any, tokenizer: Any, config: TinyGPT2Config, *, content_hash: str, history: dict,
                 loaded_from_cache: bool = False) -> None:
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.config = config
        self.content_hash = content_hash
        self.history = history
        self.loaded_from_cache = loaded_from_cache

    def __repr__(self) -> str:
        return f"TinyGPT2({self.content_hash[:12]}, lm_loss={self.history.get('final_loss')}, " \
               f"cached={self.loaded_from_cache})"


def _pretrain(cfg: TinyGPT2Config, seed: int, key: str) -> TinyGPT2:
    from transformers import GPT2LMHeadModel

    from ..data.public_corpus import generate_causal_public_corpus

    tokenizer = make_tokenizer(vocabulary())
    ids, attention = encode_sentences(tokenizer, generate_causal_public_corpus(cfg.sentences, seed=seed),
                                      cfg.n_positions)
    began = time.perf_counter()
    with training.torch_threads(cfg.threads), training.seeded(seed):
        model = GPT2LMHeadModel(gpt2_config(cfg, tokenizer))
        optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        losses = lm_epochs(model, optimizer, ids, attention, epochs=cfg.epochs, batch_size=cfg.batch_size,
                           generator=torch.Generator().manual_seed(seed))
    history = {"epoch_losses": losses, "final_loss": round(losses[-1], 4), "seconds": time.perf_counter() - began}
    return TinyGPT2(model, tokenizer, cfg, content_hash=key, history=history)


def save_model(model: Any, tokenizer: Any, folder: Path, what: str) -> None:
    """``save_pretrained`` of ``model`` (under ``model/``) and ``tokenizer`` (``tokenizer/``), weights checked finite."""
    from ..finite import require_finite

    for name, tensor in model.state_dict().items():
        require_finite(tensor, what=f"the trained weight {name} of {what}",
                       fix="training diverged; lower lr or check the data for extreme values")
    model.save_pretrained(folder / "model", safe_serialization=True)
    tokenizer.save_pretrained(folder / "tokenizer")


def load_model(folder: Path, device: torch.device) -> tuple[Any, Any, dict]:
    """``(model, tokenizer, record)`` of an entry written by :func:`save_model` plus its record; weights checked."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ..finite import NonFiniteError, require_finite

    try:
        record = json.loads((folder / RECORD_FILE).read_text(encoding="utf-8"))
        model = AutoModelForCausalLM.from_pretrained(folder / "model", use_safetensors=True)
        tokenizer = AutoTokenizer.from_pretrained(folder / "tokenizer")
    except Exception as exc:  # missing part, bad JSON, truncated safetensors ...
        raise training.CorruptEntryError(f"cache entry {folder} is unreadable: {exc}") from exc
    if record.get("content_hash") != folder.name or record.get("code_version") != training.CODE_VERSION:
        raise training.CorruptEntryError(f"cache entry {folder}: {RECORD_FILE} is for another key or code version")
    try:
        for name, tensor in model.state_dict().items():
            require_finite(tensor, what=f"cache entry {folder}: weight {name}",
                           fix="the entry was damaged or edited; it is discarded and retrained")
    except NonFiniteError as exc:
        raise training.CorruptEntryError(str(exc)) from exc
    return model.to(device).eval(), tokenizer, record


def _save(base: TinyGPT2, folder: Path) -> dict:
    save_model(base.model, base.tokenizer, folder, f"{KIND} {base.content_hash[:12]}")
    record = {"kind": KIND, "code_version": training.CODE_VERSION, "content_hash": base.content_hash,
              "config": base.config.to_json(), "history": base.history}
    (folder / RECORD_FILE).write_text(json.dumps(record, indent=1, sort_keys=True), encoding="utf-8")
    return {"kind": KIND, "config": base.config.to_json()}


def _load(folder: Path, device: torch.device) -> TinyGPT2:
    model, tokenizer, record = load_model(folder, device)
    return TinyGPT2(model, tokenizer, TinyGPT2Config(**record["config"]), content_hash=record["content_hash"],
                    history=record["history"], loaded_from_cache=True)


def tiny_gpt2_key(seed: int = 0, cfg: TinyGPT2Config | None = None) -> str:
    """The content hash of the tiny GPT-2 pretrained with ``cfg`` (default config) and ``seed``, without training.

    It names the corpus, config, vocabulary, seed and code version, so a target fine-tuned from the base
    is keyed without loading the base.
    """
    from ..cache.targets import content_hash
    from ..data.public_corpus import generate_causal_public_corpus

    cfg = cfg or TinyGPT2Config()
    corpus = "\n".join(" ".join(s) for s in generate_causal_public_corpus(cfg.sentences, seed=seed))
    return content_hash({"kind": KIND, "config": cfg, "seed": seed, "vocabulary": list(vocabulary()),
                         "corpus": content_hash(corpus), "code_version": training.CODE_VERSION})


def pretrain_tiny_gpt2(*, cache=None, seed: int = 0, device: str = "cpu", **config) -> TinyGPT2:
    """The tiny GPT-2 pretrained on the public corpus (``config``: fields of :class:`TinyGPT2Config`).

    Trained once per content hash through ``cache`` (a ``TargetCache`` or None).
    """
    cfg = training.make_config(TinyGPT2Config, config, kind=KIND)
    key = tiny_gpt2_key(seed, cfg)
    torch_device = torch.device(device)
    base, _ = training.cached(cache, key, build=lambda: _pretrain(cfg, seed, key), save=_save,
                              load=lambda folder: _load(folder, torch_device), name=f"{KIND} {key[:8]}")
    if base.model.device != torch_device:
        base.model.to(torch_device)
    return base
