"""A small word-level LSTM language model: the generative setting of exposure.

The Secret Sharer (quoted in d-exposure-discriminative §2, eq. 1) measures
exposure of canaries in a language model through their log-perplexity
``-log2 Pr(x_1..x_n)``; this target provides it as a
:class:`~pytest_privleak.protocols.SequenceScorer` (``score``) and a batched
fast path over token ids (``score_token_ids``) for exposure over whole canary
spaces.

The model reads only tokens: intents and tags of the dataset are ignored.
Each utterance is modelled as ``<s> x_1 .. x_n </s>``; the boundary token is
one extra row after the shared :class:`~.vocab.Vocabulary` ids.  Training is
the shared seeded loop (:func:`.training.fit`) with the per-utterance summed
cross-entropy, so the score is exactly the training loss (in bits).

Vocabulary (:mod:`.vocab`): training tokens plus every built-in canary
pattern's tokens, those of patterns injected with ``inject_canaries`` and
``extra_tokens``; tokens the training split never has read (and are predicted
as) ``<unk>``. After training the ``<unk>`` input row is the mean of the
rarest training words' input rows (:mod:`.unk_training`; nothing is trained
for it). Word dropout is a defence the user names (``unk_alpha > 0``,
Kiperwasser & Goldberg 2016: 0.25; default 0): during training a token seen
``#(w)`` times is then fed as ``<unk>`` with probability
``unk_alpha / (unk_alpha + #(w))`` (its prediction target stays the word) and
the ``<unk>`` input row is trained instead.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from . import training
from .base import TrainedTarget
from .stacked import language_model as stacked_lm
from .stacked import params as stacked_params
from .stacked.loop import fit_stacked
from .stacked.plan import padded_rows, stack_groups
from .unk_training import (DEFAULT_UNK_ALPHA, check_unk_alpha, finish_unk_rows, rare_word_rows, set_unk_row,
                           unk_probabilities)
from .vocab import PAD_ID, Vocabulary, check_extra_tokens

KIND = "lstm-lm"
LN2 = math.log(2.0)


@dataclass(frozen=True)
class LSTMLMConfig:
    """Hyper-parameters; defaults are CPU-sized so that a 4-digit pin repeated 100 times is memorised."""

    epochs: int = 12
    batch_size: int = 32
    lr: float = 5e-3                 # Adam
    embedding_dim: int = 32
    hidden_dim: int = 96
    num_layers: int = 1
    dropout: float = 0.0             # defence: dropout on embeddings and LSTM outputs
    early_stopping: bool = False     # defence: stop on the validation loss
    patience: int = 3
    grad_clip: float = 5.0
    extra_tokens: tuple[str, ...] = ()   # tokens the vocabulary must hold besides training and canary tokens
    unk_alpha: float = DEFAULT_UNK_ALPHA  # defence: word dropout, fed as <unk> w.p. a / (a + #(w)); 0: off

    def __post_init__(self) -> None:
        object.__setattr__(self, "extra_tokens", check_extra_tokens(self.extra_tokens))
        check_unk_alpha(self.unk_alpha)
        training.check_training_config(
            self, ("epochs", "batch_size", "embedding_dim", "hidden_dim", "num_layers", "patience"))

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


class LSTMLMNet(nn.Module):
    """Embedding -> LSTM -> linear over ``|V| + 1`` outputs (the last one is the boundary token)."""

    def __init__(self, vocab_size: int, config: LSTMLMConfig) -> None:
        super().__init__()
        self.boundary = vocab_size
        self.embedding = nn.Embedding(vocab_size + 1, config.embedding_dim, padding_idx=PAD_ID)
        self.lstm = nn.LSTM(config.embedding_dim, config.hidden_dim, num_layers=config.num_layers,
                            batch_first=True, dropout=config.dropout if config.num_layers > 1 else 0.0)
        self.dropout = nn.Dropout(config.dropout)
        self.output = nn.Linear(config.hidden_dim, vocab_size + 1)

    def nll(self, ids: torch.Tensor, lengths: torch.Tensor, input_ids: torch.Tensor | None = None) -> torch.Tensor:
        """Summed negative log-likelihood (nats) ``[B]`` of ``<s> ids </s>``; ``ids`` padded with ``PAD_ID``.

        ``input_ids`` (same shape) are fed instead of ``ids`` when given (word dropout).
        """
        return self.token_nll(ids, lengths, input_ids).sum(dim=1)

    def token_nll(self, ids: torch.Tensor, lengths: torch.Tensor,
                  input_ids: torch.Tensor | None = None) -> torch.Tensor:
        """Per-position negative log-likelihood (nats) ``[B, L + 1]`` of ``ids`` then ``</s>``, 0 past each end."""
        batch, width = ids.shape
        bos = torch.full((batch, 1), self.boundary, dtype=torch.long, device=ids.device)
        inputs = torch.cat([bos, ids if input_ids is None else input_ids], dim=1)   # [B, L+1]
        targets = torch.cat([ids, torch.full_like(bos, PAD_ID)], dim=1)
        targets.scatter_(1, lengths.unsqueeze(1).to(ids.device), self.boundary)  # </s> after the last token
        hidden, _ = self.lstm(self.dropout(self.embedding(inputs)))
        logits = self.output(self.dropout(hidden))
        losses = -torch.log_softmax(logits, dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        mask = torch.arange(width + 1, device=ids.device).unsqueeze(0) <= lengths.to(ids.device).unsqueeze(1)
        return losses * mask


def _collate(items: Sequence[list[int]], device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    lengths = torch.tensor([len(x) for x in items], dtype=torch.long)
    ids = torch.full((len(items), int(lengths.max())), PAD_ID, dtype=torch.long)
    for row, tokens in enumerate(items):
        ids[row, :len(tokens)] = torch.tensor(tokens, dtype=torch.long)
    return ids.to(device), lengths.to(device)


class LSTMLanguageModel(TrainedTarget):
    """A trained LSTM LM; a ``SequenceScorer`` whose score is the log-perplexity in bits."""

    kind = KIND

    def __init__(self, net: LSTMLMNet, vocab: Vocabulary, config: LSTMLMConfig, *, seed: int,
                 history: training.TrainingHistory, content_hash: str, loaded_from_cache: bool = False,
                 score_chunk: int = 4096) -> None:
        super().__init__(net, vocab, config, seed=seed, history=history, content_hash=content_hash,
                         loaded_from_cache=loaded_from_cache)
        self.history = history
        self.score_chunk = score_chunk
        self._read_ids = torch.tensor(vocab.read_ids, dtype=torch.long, device=self.device)

    @torch.no_grad()
    def score_token_ids(self, ids: torch.Tensor, intent: str | None = None,
                        tags: Sequence[str] | None = None) -> torch.Tensor:
        """Log-perplexity in bits ``[B]`` of same-length rows ``ids [B, L]`` (intent and tags are ignored)."""
        if ids.dim() != 2:
            raise ValueError(f"ids must be [B, L], got {list(ids.shape)}")
        ids = self._read_ids[ids.to(self.device)]   # untrained tokens read (and are predicted as) <unk>
        lengths = torch.full((ids.shape[0],), ids.shape[1], dtype=torch.long, device=self.device)
        out = [self.net.nll(ids[s:s + self.score_chunk], lengths[s:s + self.score_chunk])
               for s in range(0, ids.shape[0], self.score_chunk)]
        return torch.cat(out) / LN2

    @torch.no_grad()
    def next_token_log_probs(self, ids: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor] | None = None
                             ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """Log-probabilities ``[B, |V| + 1]`` of the next token after feeding ``ids [B, L]``, and the LSTM state.

        ``state=None`` starts an utterance (``<s>`` is fed first); the last column is ``</s>``
        (``net.boundary``). Tokens are read as :meth:`score` reads them (untrained ones as
        ``<unk>``), so generating with these log-probabilities samples the scored model.
        """
        ids, known = ids.to(self.device), self._read_ids.shape[0]
        ids = torch.where(ids < known, self._read_ids[ids.clamp(max=known - 1)], ids)   # </s> is read as itself
        if state is None:
            bos = torch.full((ids.shape[0], 1), self.net.boundary, dtype=torch.long, device=self.device)
            ids = torch.cat([bos, ids], dim=1)
        hidden, state = self.net.lstm(self.net.embedding(ids), state)
        return torch.log_softmax(self.net.output(hidden[:, -1]).float(), dim=-1), state

    @torch.no_grad()
    def token_log_probs(self, utterances: Sequence) -> list[np.ndarray]:
        """``log Pr`` (nats) of each token of each utterance and of its ``</s>``, as :meth:`score` reads them.

        The per-token view Min-K% Prob needs (:mod:`pytest_privleak.attacks.membership.reference_free`);
        each row sums to ``-score(u) * ln 2``.
        """
        encoded = [self.vocab.token_ids(u.tokens) for u in utterances]
        rows: list[np.ndarray] = []
        for s in range(0, len(encoded), self.score_chunk):
            chunk = encoded[s:s + self.score_chunk]
            ids, lengths = _collate(chunk, self.device)
            losses = self.net.token_nll(ids, lengths).double().cpu().numpy()
            rows += [-losses[i, :len(tokens) + 1] for i, tokens in enumerate(chunk)]
        return rows

    @torch.no_grad()
    def score(self, utterances: Sequence) -> np.ndarray:
        """Log-perplexity in bits of each utterance (lower = more likely); unknown tokens -> ``<unk>``."""
        encoded = [self.vocab.token_ids(u.tokens) for u in utterances]
        out = np.empty(len(encoded), dtype=np.float64)
        for s in range(0, len(encoded), self.score_chunk):
            ids, lengths = _collate(encoded[s:s + self.score_chunk], self.device)
            out[s:s + len(ids)] = (self.net.nll(ids, lengths) / LN2).double().cpu().numpy()
        return out


def _save(target: LSTMLanguageModel, folder: Path) -> dict:
    return training.save_target(folder, KIND, target, target.history)


def _load(folder: Path, device: torch.device) -> LSTMLanguageModel:
    tensors, record = training.load_entry(folder, str(device))
    try:
        vocab = Vocabulary.from_json(record["vocab"])
        config = LSTMLMConfig(**record["config"])
        net = LSTMLMNet(len(vocab.tokens), config).to(device)
        net.load_state_dict(tensors, strict=True)
        return LSTMLanguageModel(net, vocab, config, seed=record["seed"],
                                 history=training.TrainingHistory.from_json(record["history"]),
                                 content_hash=record["content_hash"], loaded_from_cache=True)
    except (KeyError, TypeError, ValueError, RuntimeError) as exc:
        raise training.CorruptEntryError(f"cache entry {folder} does not rebuild a {KIND} model: {exc}") from exc


def build(dataset, config: LSTMLMConfig, *, device: torch.device, seed: int, content_hash: str,
          progress: bool = True, threads: int | None = 1) -> LSTMLanguageModel:
    """Train a fresh model on ``device`` (no cache): a stack of one (:func:`build_many`)."""
    return build_many([(dataset, seed, content_hash)], config, device=device, progress=progress, threads=threads)[0]


def dataset_width(dataset) -> int:
    """Tokens every batch of a model is padded to: the longest utterance of its dataset (all splits), so that
    its arithmetic does not depend on the models stacked with it."""
    return max(len(u.tokens) for split in (dataset.train, dataset.valid, dataset.test) for u in split)


def build_many(runs: Sequence[tuple], config: LSTMLMConfig, *, device: torch.device, progress: bool = True,
               threads: int | None = 1) -> list[LSTMLanguageModel]:
    """Train fresh models, one per ``(dataset, seed, content_hash)`` of ``runs``, stacked (:mod:`.stacked`).

    Each model is initialised under its seed as a model trained alone and
    trains with its own data order, dropout and word dropout; models whose
    vocabularies differ in size stack when their padded sizes agree
    (:mod:`.stacked.plan`). The ``<unk>`` input
    row is set from the rare words before each validation pass and after training.
    """
    out: list[LSTMLanguageModel | None] = [None] * len(runs)
    # a fixed thread count: the same weights whatever the core count (the cache key has none)
    with training.torch_threads(threads if device.type == "cpu" else None):
        prepared = []
        for dataset, seed, key in runs:
            vocab = Vocabulary.from_dataset(dataset, config.extra_tokens)
            with training.seeded(seed, device):
                net = LSTMLMNet(len(vocab.tokens), config).to(device)
                noise_seed = stacked_params.noise_seed()
            prepared.append(dict(
                dataset=dataset, seed=seed, key=key, vocab=vocab, net=net, noise_seed=noise_seed,
                width=dataset_width(dataset),
                train=[vocab.token_ids(u.tokens) for u in dataset.train],
                valid=[vocab.token_ids(u.tokens) for u in dataset.valid],
                unk=unk_probabilities(vocab, dataset.train, config.unk_alpha, device),
                rare=rare_word_rows(vocab, dataset.train) if config.unk_alpha == 0.0 else None))
        sized = ("embedding.weight", "output.weight", "output.bias")          # rows padded in a stack
        for group in stack_groups([r["net"] for r in prepared], [(len(r["train"]), r["width"]) for r in prepared],
                                  sized):
            members = [prepared[i] for i in group]
            rows = padded_rows(len(members[0]["vocab"].tokens) + 1)
            unk = ([torch.nn.functional.pad(r["unk"], (0, rows - len(r["unk"]))) for r in members]
                   if config.unk_alpha > 0.0 else [None] * len(members))

            def before_validation(params: dict, models: Sequence[int], members=members) -> None:
                for row, j in enumerate(models):
                    if members[j]["rare"] is not None:
                        set_unk_row(params["embedding.weight"][row], members[j]["rare"])

            histories = fit_stacked(
                [r["net"] for r in members],
                lambda params, batch, noise: stacked_lm.losses(params, batch, noise, dropout=config.dropout,
                                                               num_layers=config.num_layers),
                [stacked_lm.encode(r["train"], r["width"], device, len(r["vocab"].tokens), u)
                 for r, u in zip(members, unk)],
                [stacked_lm.encode(r["valid"], r["width"], device, len(r["vocab"].tokens)) for r in members],
                stacked_lm.take,
                seeds=[r["seed"] for r in members], noise_seeds=[r["noise_seed"] for r in members],
                epochs=config.epochs, batch_size=config.batch_size, lr=config.lr, device=device,
                names=[f"{KIND} {r['key'][:8]}" for r in members], early_stopping=config.early_stopping,
                patience=config.patience, grad_clip=config.grad_clip or None, progress=progress,
                after_backward=stacked_lm.zero_padding_row, before_validation=before_validation,
                vocabulary_sized=sized, padding_fill=stacked_lm.PADDING_FILL)
            for index, run, history in zip(group, members, histories):
                finish_unk_rows(run["net"].embedding.weight, run["vocab"], run["dataset"].train, config.unk_alpha)
                out[index] = LSTMLanguageModel(run["net"], run["vocab"], config, seed=run["seed"], history=history,
                                               content_hash=run["key"])
    return out


def train(dataset, *, device: str = "cpu", cache=None, seed: int = 0, progress: bool = True,
          threads: int | None = 1, **config) -> LSTMLanguageModel:
    """Train (or load from ``cache``) the LSTM LM on ``dataset.train``; ``config``: :class:`LSTMLMConfig` fields.

    ``threads`` caps torch's CPU threads while training (1: the same weights on
    any core count; ``None`` leaves torch's setting); not part of the cache key.
    """
    return training.train_or_load(
        KIND, LSTMLMConfig, config, dataset, device=device, cache=cache, seed=seed,
        build=lambda cfg, dev, key: build(dataset, cfg, device=dev, seed=seed, content_hash=key,
                                        progress=progress, threads=threads),
        save=_save, load=lambda folder, dev: _load(folder, dev), progress=progress)


def train_many(runs: Sequence[tuple], *, device: str = "cpu", cache=None, progress: bool = True,
               threads: int | None = 1, **config) -> list[LSTMLanguageModel]:
    """:func:`train` for several ``(dataset, seed)`` runs of one config, those not in ``cache`` trained together
    (:func:`build_many`); each is cached under the key :func:`train` gives it."""
    return training.train_or_load_many(
        KIND, LSTMLMConfig, config, runs, device=device, cache=cache,
        build_many=lambda cfg, dev, todo: build_many(todo, cfg, device=dev, progress=progress, threads=threads),
        save=_save, load=lambda folder, dev: _load(folder, dev), progress=progress)
