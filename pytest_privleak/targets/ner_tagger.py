"""A BiLSTM-CRF named-entity tagger: the discriminative target of d-exposure.

d-exposure-discriminative §4.1 uses a BiLSTM tagger on CoNLL-2003; here word
embeddings are trained from scratch (GloVe cannot be downloaded) and sizes
are CPU-small.  The tagger is a :class:`~pytest_privleak.protocols.TokenScorer`:
``token_label_probs`` returns the CRF's per-token marginals
``Pr[y_t = k | x]``.  pytorch-crf has no marginals, so :func:`crf_log_marginals`
runs the forward-backward recursions in log space, batched over sentences,
on the CRF's own parameters.

Vocabulary and ``<unk>`` as in the joint target (:mod:`.vocab`,
:mod:`.unk_training`): reserved canary tokens and ``extra_tokens`` are
held, and a token seen ``#(w)`` times in training reads ``<unk>`` with
probability ``unk_alpha / (unk_alpha + #(w))`` (word dropout, Kiperwasser &
Goldberg 2016).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
from torchcrf import CRF

from . import training
from .base import TrainedTarget
from .unk_training import DEFAULT_UNK_ALPHA, check_unk_alpha, drop_to_unk, tie_untrained_rows, unk_probabilities
from .vocab import PAD_ID, Vocabulary, check_extra_tokens

KIND = "ner-bilstm-crf"


def crf_log_marginals(emissions: torch.Tensor, mask: torch.Tensor, start: torch.Tensor, end: torch.Tensor,
                      transitions: torch.Tensor) -> torch.Tensor:
    """``log Pr[y_t = k | x]`` ``[B, L, T]`` of a linear-chain CRF by forward-backward in log space.

    ``emissions [B, L, T]``; ``mask [B, L]`` bool, each row a prefix of True (first
    position on); ``start``/``end [T]`` and ``transitions [T, T]`` (from, to) as in
    ``torchcrf.CRF``. Padded positions get ``-inf``.
    """
    if mask.dtype != torch.bool:
        raise TypeError("mask must be a bool tensor")
    if not bool(mask[:, 0].all()):
        raise ValueError("every sequence needs at least one token (mask[:, 0] must be True)")
    batch, length, n_tags = emissions.shape
    trans = transitions.unsqueeze(0)                                       # [1, T, T]
    alphas = [start + emissions[:, 0]]                                     # alpha_t: [B, T]
    for t in range(1, length):
        step = torch.logsumexp(alphas[-1].unsqueeze(2) + trans, dim=1) + emissions[:, t]
        alphas.append(torch.where(mask[:, t:t + 1], step, alphas[-1]))
    log_z = torch.logsumexp(alphas[-1] + end, dim=1)                      # [B]
    betas = [end.expand(batch, n_tags)]
    for t in range(length - 2, -1, -1):
        step = torch.logsumexp(trans + (emissions[:, t + 1] + betas[0]).unsqueeze(1), dim=2)
        betas.insert(0, torch.where(mask[:, t + 1:t + 2], step, end.expand(batch, n_tags)))
    out = torch.stack(alphas, 1) + torch.stack(betas, 1) - log_z.view(batch, 1, 1)
    return out.masked_fill(~mask.unsqueeze(2), float("-inf"))


@dataclass(frozen=True)
class NERTaggerConfig:
    """Hyper-parameters; defaults are CPU-sized (the paper's §4.1 tagger is larger and uses GloVe)."""

    epochs: int = 15
    batch_size: int = 32
    lr: float = 5e-3                 # Adam (the paper: SGD with decay; Adam trains faster on small data)
    embedding_dim: int = 32
    hidden_dim: int = 48             # per direction
    dropout: float = 0.0             # paper: 0.5
    early_stopping: bool = False
    patience: int = 5
    grad_clip: float = 5.0
    extra_tokens: tuple[str, ...] = ()   # tokens the vocabulary must hold besides training and canary tokens
    unk_alpha: float = DEFAULT_UNK_ALPHA  # word dropout: reads <unk> w.p. unk_alpha / (unk_alpha + #(w))

    def __post_init__(self) -> None:
        object.__setattr__(self, "extra_tokens", check_extra_tokens(self.extra_tokens))
        check_unk_alpha(self.unk_alpha)
        training.check_training_config(
            self, ("epochs", "batch_size", "embedding_dim", "hidden_dim", "patience"), dropout_hint=" (paper: 0.5)")

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


class NERTaggerNet(nn.Module):
    """Embeddings -> BiLSTM -> linear emissions -> CRF."""

    def __init__(self, vocab: Vocabulary, config: NERTaggerConfig) -> None:
        super().__init__()
        self.embedding = nn.Embedding(len(vocab.tokens), config.embedding_dim, padding_idx=PAD_ID)
        self.dropout = nn.Dropout(config.dropout)
        self.lstm = nn.LSTM(config.embedding_dim, config.hidden_dim, batch_first=True, bidirectional=True)
        self.emit = nn.Linear(2 * config.hidden_dim, len(vocab.tags))
        self.crf = CRF(len(vocab.tags), batch_first=True)

    def emissions(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        x = self.dropout(self.embedding(ids))
        packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
        hidden, _ = pad_packed_sequence(self.lstm(packed)[0], batch_first=True, total_length=ids.shape[1])
        return self.emit(self.dropout(hidden))

    def nll(self, ids, tags, mask, lengths) -> torch.Tensor:
        return -self.crf(self.emissions(ids, lengths), tags, mask=mask, reduction="none")

    def log_marginals(self, ids, mask, lengths) -> torch.Tensor:
        c = self.crf
        return crf_log_marginals(self.emissions(ids, lengths), mask, c.start_transitions, c.end_transitions,
                                 c.transitions)


def _collate(items: Sequence[tuple[list[int], list[int]]], device: torch.device):
    lengths = torch.tensor([len(ids) for ids, _ in items], dtype=torch.long)
    width = int(lengths.max())
    ids = torch.full((len(items), width), PAD_ID, dtype=torch.long)
    tags = torch.zeros((len(items), width), dtype=torch.long)
    for row, (tok, tag) in enumerate(items):
        ids[row, :len(tok)] = torch.tensor(tok)
        tags[row, :len(tag)] = torch.tensor(tag)
    mask = torch.arange(width).unsqueeze(0) < lengths.unsqueeze(1)
    return ids.to(device), tags.to(device), mask.to(device), lengths


def _batch_loss(net: NERTaggerNet, batch) -> torch.Tensor:
    return net.nll(*batch)


class NERTagger(TrainedTarget):
    """A trained BiLSTM-CRF tagger; a ``TokenScorer`` over its BIO ``labels`` (CRF marginals)."""

    kind = KIND

    def __init__(self, net: NERTaggerNet, vocab: Vocabulary, config: NERTaggerConfig, *, seed: int,
                 history: training.TrainingHistory, content_hash: str, loaded_from_cache: bool = False,
                 chunk: int = 2048) -> None:
        super().__init__(net, vocab, config, seed=seed, history=history, content_hash=content_hash,
                         loaded_from_cache=loaded_from_cache)
        self.labels: list[str] = list(vocab.tags)
        self.history = history
        self.chunk = chunk

    @torch.no_grad()
    def token_label_probs(self, sentences: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """For each sentence a ``[len, len(labels)]`` array of CRF marginals (rows sum to 1)."""
        out: list[np.ndarray] = []
        for s in range(0, len(sentences), self.chunk):
            rows = [(self.vocab.token_ids(list(x)), [0] * len(x)) for x in sentences[s:s + self.chunk]]
            if any(not ids for ids, _ in rows):
                raise ValueError("token_label_probs got an empty sentence; give at least one token each")
            ids, _, mask, lengths = _collate(rows, self.device)
            probs = self.net.log_marginals(ids, mask, lengths).exp().double().cpu().numpy()
            out.extend(probs[i, :n] for i, n in enumerate(lengths.tolist()))
        return out

    @torch.no_grad()
    def tag_accuracy(self, utterances: Sequence) -> float:
        """Token accuracy of the marginal argmax labels over ``utterances``."""
        probs = self.token_label_probs([u.tokens for u in utterances])
        hits = sum(int((p.argmax(1) == np.array(self.vocab.tag_ids(u.tags))).sum()) for p, u in zip(probs, utterances))
        return hits / sum(len(u.tokens) for u in utterances)


def _save(target: NERTagger, folder: Path) -> dict:
    return training.save_target(folder, KIND, target, target.history)


def _load(folder: Path, device: torch.device) -> NERTagger:
    tensors, record = training.load_entry(folder, str(device))
    try:
        vocab = Vocabulary.from_json(record["vocab"])
        config = NERTaggerConfig(**record["config"])
        net = NERTaggerNet(vocab, config).to(device)
        net.load_state_dict(tensors, strict=True)
        return NERTagger(net, vocab, config, seed=record["seed"],
                         history=training.TrainingHistory.from_json(record["history"]),
                         content_hash=record["content_hash"], loaded_from_cache=True)
    except (KeyError, TypeError, ValueError, RuntimeError) as exc:
        raise training.CorruptEntryError(f"cache entry {folder} does not rebuild a {KIND} model: {exc}") from exc


def build(dataset, config: NERTaggerConfig, *, device: torch.device, seed: int, content_hash: str,
          progress: bool = True, threads: int | None = 1) -> NERTagger:
    """Train a fresh tagger on ``device`` (no cache)."""
    vocab = Vocabulary.from_dataset(dataset, config.extra_tokens)
    encode = lambda items: [(vocab.token_ids(u.tokens), vocab.tag_ids(u.tags)) for u in items]  # noqa: E731
    unk_probs = unk_probabilities(vocab, dataset.train, config.unk_alpha, device)

    def training_loss(net: NERTaggerNet, batch) -> torch.Tensor:
        ids, tags, mask, lengths = batch
        if net.training:
            ids = drop_to_unk(ids, unk_probs)
        return net.nll(ids, tags, mask, lengths)

    # a fixed thread count: the same weights whatever the core count (the cache key has none)
    with training.seeded(seed, device), training.torch_threads(threads if device.type == "cpu" else None):
        net = NERTaggerNet(vocab, config).to(device)
        history = training.fit(
            net, training_loss, encode(dataset.train), encode(dataset.valid), lambda items: _collate(items, device),
            epochs=config.epochs, batch_size=config.batch_size, lr=config.lr, seed=seed,
            early_stopping=config.early_stopping, patience=config.patience, grad_clip=config.grad_clip or None,
            name=f"{KIND} {content_hash[:8]}", progress=progress)
        tie_untrained_rows(net.embedding.weight, vocab)
    return NERTagger(net, vocab, config, seed=seed, history=history, content_hash=content_hash)


def train(dataset, *, device: str = "cpu", cache=None, seed: int = 0, progress: bool = True,
          threads: int | None = 1, **config) -> NERTagger:
    """Train (or load from ``cache``) the tagger; ``config`` keys are :class:`NERTaggerConfig` fields.

    ``threads`` caps torch's CPU threads while training (1: the same weights on
    any core count; ``None`` leaves torch's setting); not part of the cache key.
    """
    return training.train_or_load(
        KIND, NERTaggerConfig, config, dataset, device=device, cache=cache, seed=seed,
        build=lambda cfg, dev, key: build(dataset, cfg, device=dev, seed=seed, content_hash=key,
                                        progress=progress, threads=threads),
        save=_save, load=lambda folder, dev: _load(folder, dev), progress=progress)
