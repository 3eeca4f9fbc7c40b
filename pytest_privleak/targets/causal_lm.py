"""``causal-lm``: a pretrained causal transformer LM fine-tuned on the (canary-injected) private data.

The generative setting of the Secret Sharer (exposure by log-perplexity,
quoted as eq. 1 of d-exposure-discriminative §2) with the model teams
fine-tune today: a GPT-2-style causal LM, pretrained on public text, then
fine-tuned on private utterances with the plain language-modelling loss.
Each utterance is ``<s> x_1 .. x_n </s>`` and the loss sums the
cross-entropy of every token after ``<s>``; intents and tags are ignored.
As the paper's model, nothing regularises it unless the user says so:
no dropout, no weight decay, no early stopping by default.

Bases (``base=``):

* ``"tiny-gpt2"`` (default): the project's own tiny GPT-2, pretrained on the
  generated public corpus (:mod:`.tiny_gpt2`), no download. Its word-level
  vocabulary grows by the words of the fine-tuning data it lacks (training
  tokens, injected canary patterns' tokens, ``extra_tokens``), each new row
  starting at the mean of the pretrained rows, so every candidate secret has
  its own row;
* a local folder written by ``save_pretrained`` holding a causal LM and its
  tokenizer (GPT-2-like; the MiniLM the classifier target uses is not causal).
  Its tokenizer is used as it is.

The target is a :class:`~pytest_privleak.protocols.SequenceScorer` through
the causal-LM adapter (:class:`~pytest_privleak.adapters.language_model.CausalLMScorer`):
``score`` is the log-perplexity in bits of ``<s> x_1 .. x_n`` (lower = more
likely), and ``score_with_shared_prefix`` scores a whole canary space with
the prefix computed once. ``model`` and ``tokenizer`` are the transformers
objects, for generation attacks and ``from_transformers``.
Trained once per content hash (dataset, config, seed, base, code version).
"""
from __future__ import annotations

import copy
import dataclasses
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from . import training
from .vocab import check_extra_tokens

KIND = "causal-lm"
TINY_BASE = "tiny-gpt2"


@dataclass(frozen=True)
class CausalLMConfig:
    """Fine-tuning hyper-parameters; defaults memorise a 4-digit pin said 10 times on CPU in seconds."""

    base: str = TINY_BASE
    epochs: int = 12
    batch_size: int = 32
    lr: float = 2e-3                 # Adam, no weight decay
    dropout: float = 0.0             # defence: residual, embedding and attention dropout while fine-tuning
    early_stopping: bool = False     # defence: stop on the validation loss
    patience: int = 3
    grad_clip: float = 1.0
    max_length: int = 64             # pieces per utterance with <s> and </s>; longer ones are cut
    extra_tokens: tuple[str, ...] = ()   # words the tiny base's vocabulary must hold besides the data's
    base_seed: int = 0               # pretraining seed of the tiny base: one public model whatever the seed
    threads: int | None = 1

    def __post_init__(self) -> None:
        if isinstance(self.base, Path):
            object.__setattr__(self, "base", str(self.base))
        if not isinstance(self.base, str) or not self.base:
            raise ValueError(f"base={self.base!r} must be {TINY_BASE!r} or a local folder holding a causal LM "
                             "written by save_pretrained (a str path)")
        object.__setattr__(self, "extra_tokens", check_extra_tokens(self.extra_tokens))
        if not isinstance(self.base_seed, int) or isinstance(self.base_seed, bool) or self.base_seed < 0:
            raise ValueError(f"config base_seed={self.base_seed!r} must be an integer >= 0; fix: e.g. base_seed=0")
        training.check_training_config(self, ("epochs", "batch_size", "patience", "max_length"))

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


# --------------------------------------------------------------------------- bases

def base_folder(base: str) -> Path | None:
    """The folder ``base`` names (None for the tiny GPT-2); a clear error when it holds no causal LM."""
    if base == TINY_BASE:
        return None
    folder = Path(base)
    if not (folder / "config.json").is_file():
        raise FileNotFoundError(f"base={base!r}: {folder} is not a transformers model folder (no config.json); "
                                f"fix: pass {TINY_BASE!r} or a folder written by model.save_pretrained(folder) and "
                                "tokenizer.save_pretrained(folder)")
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    from transformers.models.auto import modeling_auto

    causal = set(modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)
    heads = config.get("architectures") or []
    is_causal = any(h.endswith(("ForCausalLM", "LMHeadModel")) for h in heads) if heads else \
        config.get("model_type") in causal
    if not is_causal:
        raise ValueError(f"base={base!r}: {folder} holds a {config.get('model_type')!r} model "
                         f"({', '.join(heads) or 'no head named'}), which is not a causal "
                         f"language model (e.g. BERT or MiniLM are masked encoders); fix: pass a GPT-2-like causal "
                         f"LM folder, or {TINY_BASE!r}")
    return folder


def load_base(cfg: CausalLMConfig, *, cache) -> tuple[Any, Any, str]:
    """``(model, tokenizer, digest)`` of the base: the tiny GPT-2 (pretrained or cached) or a local folder.

    The tiny base is pretrained with ``cfg.base_seed``, not the fine-tuning seed: as a team's downloaded
    model, the public base is one model, and training seeds vary the fine-tuning only.
    """
    folder = base_folder(cfg.base)
    if folder is None:
        from .tiny_gpt2 import pretrain_tiny_gpt2

        base = pretrain_tiny_gpt2(cache=cache, seed=cfg.base_seed)
        return base.model, base.tokenizer, base.content_hash
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from .transformer_classifier import folder_digest

    try:
        tokenizer = AutoTokenizer.from_pretrained(str(folder))
    except Exception as exc:
        raise ValueError(f"base={cfg.base!r}: the folder has no tokenizer transformers can load ({exc}); fix: "
                         "tokenizer.save_pretrained(folder) beside the model") from exc
    model = AutoModelForCausalLM.from_pretrained(str(folder))
    return model, tokenizer, folder_digest(folder)


def extend_vocabulary(tokenizer: Any, model: Any, words: Sequence[str]) -> tuple[Any, list[str]]:
    """The tiny base's word-level tokenizer grown by the lower-cased ``words`` it lacks, and those words.

    The tokenizer is rebuilt with the new words as ordinary rows after the old
    ones (not as "added tokens", which would also match inside longer words);
    the model's embedding grows to match, each new row starting at the mean of
    the pretrained rows (the output layer is tied to it).
    """
    from .tiny_gpt2 import make_tokenizer

    rows = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
    new = sorted({w.lower() for w in words} - set(rows))
    if not new:
        return tokenizer, []
    old = model.get_input_embeddings().weight.shape[0]
    tokenizer = make_tokenizer([*rows, *new])
    model.resize_token_embeddings(len(tokenizer), mean_resizing=False)
    with torch.no_grad():
        table = model.get_input_embeddings().weight
        table[old:] = table[:old].mean(0)
    return tokenizer, new


# --------------------------------------------------------------------------- the target

class _Threaded:
    """A scorer whose calls run under the target's thread count (the base beside the target)."""

    def __init__(self, scorer, threads) -> None:
        self.scorer, self._threads = scorer, threads

    def score(self, utterances):
        with self._threads():
            return self.scorer.score(utterances)

    def token_predictions(self, utterances):
        with self._threads():
            return self.scorer.token_predictions(utterances)


class CausalLMTarget:
    """A fine-tuned causal LM (``model``, eval mode, frozen) and its ``tokenizer``; a ``SequenceScorer``.

    ``score`` and ``score_with_shared_prefix`` go through the causal-LM adapter
    (log-perplexity in bits of ``<s> x_1 .. x_n``, lower = more likely);
    ``generate`` is the model's own ``generate``.
    """

    kind = KIND

    def __init__(self, model: Any, tokenizer: Any, config: CausalLMConfig, *, seed: int, content_hash: str,
                 history: dict, loaded_from_cache: bool = False) -> None:
        self.model = model.eval()
        for p in self.model.parameters():
            p.requires_grad_(False)
        self.tokenizer = tokenizer
        self.config = config
        self.seed = seed
        self.content_hash = content_hash
        self.history = history
        self.loaded_from_cache = loaded_from_cache
        self._adapter = None
        self._base = None
        self._base_loader = None      # () -> (base model, its tokenizer, digest), set by train()

    @property
    def device(self) -> torch.device:
        return self.model.get_input_embeddings().weight.device

    def adapter(self):
        """The causal-LM adapter of ``model`` (:class:`~pytest_privleak.adapters.language_model.CausalLMScorer`)."""
        if self._adapter is None:
            from ..adapters.language_model import CausalLMScorer

            self._adapter = CausalLMScorer(self.model, self.tokenizer)
        return self._adapter

    def _threads(self):
        """Scoring runs with the config's torch thread count on the CPU (1 by default), whatever the caller's:
        the shared-prefix scores moved by up to 1.2e-5 bits between 1 and 2 threads, and the result cache keys
        exposure without the thread count."""
        return training.torch_threads(self.config.threads if self.device.type == "cpu" else None)

    def score(self, utterances) -> np.ndarray:
        """Log-perplexity in bits of each utterance (lower = more likely): a SequenceScorer."""
        with self._threads():
            return self.adapter().score(utterances)

    def score_with_shared_prefix(self, prefix: Sequence[str], vocabulary: Sequence[str], choices) -> np.ndarray:
        """Scores of ``prefix + [vocabulary[c] for c in row]`` for each row of ``choices``, the prefix once."""
        with self._threads():
            return self.adapter().score_with_shared_prefix(prefix, vocabulary, choices)

    def token_log_probs(self, utterances) -> list[np.ndarray]:
        """Per-piece log-probabilities (nats) of each utterance, as :meth:`score` reads them (Min-K% Prob)."""
        with self._threads():
            return self.adapter().token_log_probs(utterances)

    def token_predictions(self, utterances):
        """Per utterance, each piece's log-probability and whether it is the most likely one (the base method)."""
        with self._threads():
            return self.adapter().token_predictions(utterances)

    def base_reference(self):
        """The model this target was fine-tuned from, as it was before the first step (the pretrained base, its
        vocabulary grown by the same words), over the same tokenizer: the free reference of the ``base``
        membership method. None when the base cannot be loaded here (no loader was attached)."""
        if self._base is None and self._base_loader is not None:
            from ..adapters.language_model import CausalLMScorer

            model, _, _ = self._base_loader()
            model = copy.deepcopy(model)
            if base_folder(self.config.base) is None:
                extend_vocabulary(self.tokenizer_of_base(), model, self.history.get("added_words", []))
            model.to(self.device).eval()
            scorer = CausalLMScorer(model, self.tokenizer)
            self._base = _Threaded(scorer, self._threads)
        return self._base

    def tokenizer_of_base(self):
        """The tiny base's own tokenizer (before the fine-tuning data's words were added)."""
        return self._base_loader()[1]

    def unknown_words(self, words: Sequence[str]) -> list[str]:
        """The ``words`` the tokenizer reads as its unknown token (they would score as another sentence)."""
        return self.adapter().unknown_words(words)

    def generate(self, *args, **kwargs):
        """``model.generate`` (transformers), for generation attacks."""
        return self.model.generate(*args, **kwargs)

    @property
    def stopped_epoch(self) -> int | None:
        return self.history.get("stopped_epoch")

    def describe(self) -> dict:
        return {"kind": KIND, "content_hash": self.content_hash, "device": str(self.device), "seed": self.seed,
                "config": self.config.to_json(), "loaded_from_cache": self.loaded_from_cache,
                "stopped_epoch": self.stopped_epoch, "base_digest": self.history.get("base_digest")}

    def __repr__(self) -> str:
        return (f"CausalLMTarget({self.content_hash[:12]}, base={self.config.base!r}, "
                f"stopped_epoch={self.stopped_epoch}, cached={self.loaded_from_cache})")


def _set_dropout(model: Any, p: float) -> None:
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = p


def _encode(model: Any, tokenizer: Any, utterances, max_length: int) -> list[list[int]]:
    """``<s> pieces </s>`` of each utterance's text (its tokens joined by spaces, as the adapter scores it)."""
    from ..adapters.language_model import bos_id_of

    bos, eos = bos_id_of(model, tokenizer), tokenizer.eos_token_id
    rows = tokenizer([" ".join(u.tokens) for u in utterances], add_special_tokens=True)["input_ids"]
    out = []
    for r in rows:
        r = list(r)
        if bos is not None and (not r or r[0] != bos):
            r = [bos] + r
        if eos is not None and (not r or r[-1] != eos):
            r = r + [eos]
        out.append(r[:max_length])
    return out


def fine_tune(model: Any, tokenizer: Any, dataset, cfg: CausalLMConfig, seed: int, name: str,
              progress: bool) -> training.TrainingHistory:
    """The language-modelling loss of every utterance, Adam, the shared seeded loop (:func:`.training.fit`)."""
    from .tiny_gpt2 import sentence_nll

    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0

    def collate(items: Sequence[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        width = max(len(r) for r in items)
        ids = torch.full((len(items), width), pad, dtype=torch.long)
        attention = torch.zeros((len(items), width), dtype=torch.long)
        for i, r in enumerate(items):
            ids[i, :len(r)] = torch.tensor(r, dtype=torch.long)
            attention[i, :len(r)] = 1
        device = model.get_input_embeddings().weight.device
        return ids.to(device), attention.to(device)

    train_items = _encode(model, tokenizer, dataset.train, cfg.max_length)
    valid_items = _encode(model, tokenizer, dataset.valid, cfg.max_length)
    _set_dropout(model, cfg.dropout)
    history = training.fit(model, lambda m, batch: sentence_nll(m, *batch), train_items, valid_items, collate,
                           epochs=cfg.epochs, batch_size=cfg.batch_size, lr=cfg.lr, seed=seed,
                           early_stopping=cfg.early_stopping, patience=cfg.patience,
                           grad_clip=cfg.grad_clip or None, name=name, progress=progress)
    _set_dropout(model, 0.0)
    return history


def _build(dataset, cfg: CausalLMConfig, seed: int, device: torch.device, base: tuple[Any, Any, str], key: str,
           progress: bool) -> CausalLMTarget:
    import copy

    model, tokenizer, digest = base
    model, tokenizer = copy.deepcopy(model), copy.deepcopy(tokenizer)
    began = time.perf_counter()
    info: dict[str, Any] = {"base_digest": digest, "base_source": cfg.base}
    with training.torch_threads(cfg.threads if device.type == "cpu" else None), training.seeded(seed, device):
        if base_folder(cfg.base) is None:
            words = [t for split in (dataset.train, dataset.valid) for u in split for t in u.tokens]
            tokenizer, info["added_words"] = extend_vocabulary(
                tokenizer, model, [*words, *getattr(dataset, "canary_tokens", ()), *cfg.extra_tokens])
        model.to(device)
        history = fine_tune(model, tokenizer, dataset, cfg, seed, f"{KIND} {key[:8]}", progress)
    info.update(history.to_json())
    info["seconds"] = time.perf_counter() - began
    return CausalLMTarget(model, tokenizer, cfg, seed=seed, content_hash=key, history=info)


def _save(target: CausalLMTarget, folder: Path) -> dict:
    from .tiny_gpt2 import RECORD_FILE, save_model

    save_model(target.model, target.tokenizer, folder, f"{KIND} {target.content_hash[:12]}")
    record = {"kind": KIND, "code_version": training.CODE_VERSION, "seed": target.seed,
              "content_hash": target.content_hash, "config": target.config.to_json(), "history": target.history}
    (folder / RECORD_FILE).write_text(json.dumps(record, indent=1, sort_keys=True), encoding="utf-8")
    return {"kind": KIND, "seed": target.seed, "config": target.config.to_json()}


def _load(folder: Path, device: torch.device) -> CausalLMTarget:
    from .tiny_gpt2 import load_model

    model, tokenizer, record = load_model(folder, device)
    try:
        cfg = CausalLMConfig(**record["config"])
        return CausalLMTarget(model, tokenizer, cfg, seed=record["seed"], content_hash=folder.name,
                              history=record["history"], loaded_from_cache=True)
    except (KeyError, TypeError, ValueError) as exc:
        raise training.CorruptEntryError(f"cache entry {folder} does not rebuild a {KIND} target: {exc}") from exc


def train(dataset, *, device: str = "cpu", cache=None, seed: int = 0, progress: bool = True,
          **config) -> CausalLMTarget:
    """Fine-tune ``config['base']`` on ``dataset``'s utterances as a causal LM (or load it from ``cache``).

    ``config``: fields of :class:`CausalLMConfig`. The cache key holds the
    dataset, config, seed, device type, code version and the base's content
    hash (tiny GPT-2) or file digest (a folder); the tiny base is itself
    pretrained once per content hash through the same cache.
    """
    from ..cache.targets import content_hash
    from ..data.types import NLUDataset

    if not isinstance(dataset, NLUDataset):
        raise TypeError(f"train_target({KIND!r}, dataset): dataset must be an NLUDataset, got "
                        f"{type(dataset).__name__}; fix: build one with pytest_privleak.data or the nlu_dataset "
                        "fixture")
    cfg = training.make_config(CausalLMConfig, config, kind=KIND)
    torch_device = torch.device(device)
    box: dict[str, tuple[Any, Any, str]] = {}

    def base() -> tuple[Any, Any, str]:
        if "base" not in box:
            box["base"] = load_base(cfg, cache=cache)
        return box["base"]

    folder = base_folder(cfg.base)
    if folder is not None:
        from .transformer_classifier import folder_digest

        base_id = folder_digest(folder)
    else:
        from .tiny_gpt2 import tiny_gpt2_key

        base_id = tiny_gpt2_key(cfg.base_seed)
    key = content_hash({"kind": KIND, "dataset": dataset.content_hash(), "config": cfg, "seed": seed,
                        "base": base_id, "device_type": torch_device.type, "code_version": training.CODE_VERSION})
    target, _ = training.cached(cache, key, build=lambda: _build(dataset, cfg, seed, torch_device, base(), key,
                                                                 progress),
                                save=_save, load=lambda f: _load(f, torch_device), name=f"{KIND} {key[:8]}",
                                progress_events=progress)
    target._base_loader = base          # the pretrained base, loaded (from the cache) when an attack asks for it
    return target
