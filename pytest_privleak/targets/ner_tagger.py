"""A BiLSTM-CRF named-entity tagger: the discriminative target of d-exposure.

d-exposure-discriminative §4.1: "a BiLSTM with GloVe embeddings, SGD
optimizer, dropout (50%) and learning rate decay, implemented with Targer",
F1 90.0 on CoNLL-2003.  :class:`NERTaggerConfig`'s defaults are that model,
with Targer's defaults for what the paper leaves open.  Differences: the
word vectors are trained from scratch (GloVe cannot be downloaded here), and
there is no character CNN (the paper names a BiLSTM only).

The tagger is a :class:`~pytest_privleak.protocols.LogTokenScorer`:
``token_label_log_probs`` returns the CRF's per-token log-marginals
``log Pr[y_t = k | x]`` computed in float64 (``token_label_probs`` their
exponential), so a memorised label's complement keeps its precision.
pytorch-crf has no marginals, so :func:`crf_log_marginals` runs the
forward-backward recursions in log space, batched over sentences, on the
CRF's own parameters.  :meth:`NERTagger.viterbi_tags` decodes, and the
entity F1 of the valid and test splits (conlleval, :mod:`.entity_f1`) is
measured at training time and kept with the target (``describe()``).

``train(..., checkpoints=[25, 50])`` keeps the tagger at those epochs of the
same training (:meth:`NERTagger.at_epoch`; each a cache entry of its own,
:func:`.training.train_or_load_epochs`), for the paper's Table 3.

Vocabulary and ``<unk>`` as in the joint target (:mod:`.vocab`,
:mod:`.unk_training`): reserved canary tokens and ``extra_tokens`` are
held. Word dropout (a token seen ``#(w)`` times reads ``<unk>`` with
probability ``unk_alpha / (unk_alpha + #(w))``, Kiperwasser & Goldberg 2016)
is a regulariser the paper's model does not have: ``unk_alpha=0`` by default;
after training, the ``<unk>`` row is then the mean of the rarest training
words' rows and untrained reserved tokens share it
(:func:`.unk_training.finish_unk_rows`).
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

from ..cache.results import mark_content_hash
from . import training
from .base import TrainedTarget
from .entity_f1 import entity_f1
from .stacked import params as stacked_params
from .stacked import tagger as stacked_tagger
from .stacked.loop import fit_stacked
from .stacked.plan import padded_rows, stack_groups
from .unk_training import check_unk_alpha, finish_unk_rows, unk_probabilities
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
    """Hyper-parameters; the defaults are the paper's tagger (§4.1) with Targer's settings.

    The paper states BiLSTM, dropout 0.5, SGD and learning-rate decay; Targer's
    defaults give the rest: lr 0.01, momentum 0.9, epoch ``e`` at
    ``lr / (1 + 0.05 e)``, batch 10, gradient norm clipped at 5, 100 hidden
    units per direction, 100-dimensional word vectors (GloVe 6B-100d there,
    trained from scratch here). 25 epochs: the first column of Table 3. No
    early stopping (the paper reports fixed epochs) and no word dropout.
    """

    epochs: int = 25
    batch_size: int = 10
    optimizer: str = "sgd"
    lr: float = 0.01
    momentum: float = 0.9
    lr_decay: float = 0.05           # epoch e trains at lr / (1 + lr_decay * e)
    embedding_dim: int = 100
    hidden_dim: int = 100            # per direction
    dropout: float = 0.5
    early_stopping: bool = False
    patience: int = 20
    grad_clip: float = 5.0
    extra_tokens: tuple[str, ...] = ()   # tokens the vocabulary must hold besides training and canary tokens
    unk_alpha: float = 0.0           # word dropout (off: not the paper's model); reads <unk> w.p. a / (a + #(w))

    def __post_init__(self) -> None:
        object.__setattr__(self, "extra_tokens", check_extra_tokens(self.extra_tokens))
        check_unk_alpha(self.unk_alpha)
        training.check_training_config(
            self, ("epochs", "batch_size", "embedding_dim", "hidden_dim", "patience"), dropout_hint=" (paper: 0.5)")
        if self.optimizer not in training.OPTIMIZERS:
            raise ValueError(f"config optimizer={self.optimizer!r} must be one of {training.OPTIMIZERS} "
                             "(paper: 'sgd')")
        for name in ("momentum", "lr_decay"):
            training.check_positive(name, getattr(self, name), integer=False, allow_zero=True)
        if self.momentum >= 1.0:
            raise ValueError(f"config momentum={self.momentum!r} must be below 1 (paper's tagger: 0.9)")
        training.normalise_floats(self)

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
        """float64 log-marginals: the float32 emissions, forward-backward in float64 (no saturation near 1)."""
        c = self.crf
        return crf_log_marginals(self.emissions(ids, lengths).double(), mask, c.start_transitions.double(),
                                 c.end_transitions.double(), c.transitions.double())

    def decode(self, ids, mask, lengths) -> list[list[int]]:
        """Viterbi tag ids per sentence."""
        return self.crf.decode(self.emissions(ids, lengths), mask=mask)


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


class NERTagger(TrainedTarget):
    """A trained BiLSTM-CRF tagger; a ``LogTokenScorer`` over its BIO ``labels`` (CRF marginals)."""

    kind = KIND
    described_epochs = ("stopped_epoch", "entity_f1")

    def __init__(self, net: NERTaggerNet, vocab: Vocabulary, config: NERTaggerConfig, *, seed: int,
                 history: training.TrainingHistory, content_hash: str, loaded_from_cache: bool = False,
                 chunk: int = 2048, facts: dict | None = None) -> None:
        super().__init__(net, vocab, config, seed=seed, history=history, content_hash=content_hash,
                         loaded_from_cache=loaded_from_cache)
        self.labels: list[str] = list(vocab.tags)
        self.history = history
        self.chunk = chunk
        self.facts: dict = dict(facts or {})
        #: epoch -> the tagger at that epoch of the same training (``train(..., checkpoints=...)``)
        self.checkpoints: dict[int, "NERTagger"] = {}

    @property
    def entity_f1(self) -> dict:
        """conlleval entity F1 (Viterbi tags) of the valid and test splits, measured when trained."""
        return self.facts.get("entity_f1", {})

    def at_epoch(self, epoch: int) -> "NERTagger":
        """This tagger at ``epoch`` of its training: itself at its last epoch, else a checkpoint."""
        if epoch == self.stopped_epoch:
            return self
        if epoch not in self.checkpoints:
            have = sorted({*self.checkpoints, self.stopped_epoch})
            raise ValueError(f"{KIND} {self.content_hash[:12]} has no checkpoint at epoch {epoch!r} (it has "
                             f"{have}); fix: train_target({KIND!r}, ..., epochs=E, checkpoints=[{epoch!r}, ...])")
        return self.checkpoints[epoch]

    def _batches(self, sentences: Sequence[Sequence[str]]):
        for s in range(0, len(sentences), self.chunk):
            rows = [(self.vocab.token_ids(list(x)), [0] * len(x)) for x in sentences[s:s + self.chunk]]
            if any(not ids for ids, _ in rows):
                raise ValueError("the tagger got an empty sentence; give at least one token each")
            yield _collate(rows, self.device)

    @torch.no_grad()
    def token_label_log_probs(self, sentences: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """For each sentence a float64 ``[len, len(labels)]`` array of CRF log-marginals."""
        out: list[np.ndarray] = []
        for ids, _, mask, lengths in self._batches(sentences):
            logs = self.net.log_marginals(ids, mask, lengths).cpu().numpy()
            out.extend(logs[i, :n] for i, n in enumerate(lengths.tolist()))
        return out

    def token_label_probs(self, sentences: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """For each sentence a ``[len, len(labels)]`` array of CRF marginals (rows sum to 1)."""
        return [np.exp(x) for x in self.token_label_log_probs(sentences)]

    @torch.no_grad()
    def viterbi_tags(self, sentences: Sequence[Sequence[str]]) -> list[list[str]]:
        """The CRF's most probable tag sequence for each sentence."""
        out: list[list[str]] = []
        for ids, _, mask, lengths in self._batches(sentences):
            out.extend([self.labels[t] for t in path] for path in self.net.decode(ids, mask, lengths))
        return out

    def measure_entity_f1(self, utterances: Sequence) -> dict:
        """conlleval entity F1 of the Viterbi tags on ``utterances`` (exact span and type, micro-averaged)."""
        return entity_f1([u.tags for u in utterances], self.viterbi_tags([u.tokens for u in utterances])).to_json()

    @torch.no_grad()
    def tag_accuracy(self, utterances: Sequence) -> float:
        """Token accuracy of the marginal argmax labels over ``utterances``."""
        probs = self.token_label_log_probs([u.tokens for u in utterances])
        hits = sum(int((p.argmax(1) == np.array(self.vocab.tag_ids(u.tags))).sum()) for p, u in zip(probs, utterances))
        return hits / sum(len(u.tokens) for u in utterances)


def _split_f1(target: NERTagger, dataset) -> dict:
    """``{"entity_f1": {"valid": ..., "test": ...}}`` for the splits that have sentences."""
    return {"entity_f1": {split: target.measure_entity_f1(items)
                          for split, items in (("valid", dataset.valid), ("test", dataset.test)) if items}}


def _save(target: NERTagger, folder: Path) -> dict:
    return training.save_target(folder, KIND, target, target.history, facts=target.facts)


def _load(folder: Path, device: torch.device) -> NERTagger:
    tensors, record = training.load_entry(folder, str(device))
    try:
        vocab = Vocabulary.from_json(record["vocab"])
        config = NERTaggerConfig(**record["config"])
        net = NERTaggerNet(vocab, config).to(device)
        net.load_state_dict(tensors, strict=True)
        return NERTagger(net, vocab, config, seed=record["seed"],
                         history=training.TrainingHistory.from_json(record["history"]),
                         content_hash=record["content_hash"], loaded_from_cache=True,
                         facts=record.get("facts") or {})
    except (KeyError, TypeError, ValueError, RuntimeError) as exc:
        raise training.CorruptEntryError(f"cache entry {folder} does not rebuild a {KIND} model: {exc}") from exc


def build_epochs(dataset, config: NERTaggerConfig, *, device: torch.device, seed: int, keys: dict[int, str],
                 progress: bool = True, threads: int | None = 1) -> dict[int, NERTagger]:
    """Train a fresh tagger on ``device`` (no cache) to ``config.epochs``; ``{epoch: tagger}`` for each of ``keys``.

    The tagger at epoch ``e`` has the weights of a training with ``epochs=e``
    (nothing in the loop depends on the total), its history up to ``e`` and
    its own entity F1; ``keys[e]`` is its content hash. A stack of one
    (:func:`build_many_epochs`).
    """
    return build_many_epochs([(dataset, seed, keys)], config, device=device, progress=progress, threads=threads)[0]


def dataset_width(dataset) -> int:
    """Tokens every batch of a model is padded to: the longest sentence of its dataset (all splits), so that
    its arithmetic does not depend on the models stacked with it."""
    return max(len(u.tokens) for split in (dataset.train, dataset.valid, dataset.test) for u in split)


def build_many_epochs(runs: Sequence[tuple], config: NERTaggerConfig, *, device: torch.device,
                      progress: bool = True, threads: int | None = 1) -> list[dict[int, NERTagger]]:
    """Train fresh taggers, one per ``(dataset, seed, {epoch: key})`` of ``runs``, stacked (:mod:`.stacked`).

    Each is initialised under its seed as a tagger trained alone and trains
    with its own data order, dropout and word dropout; taggers whose
    vocabularies differ in size stack when their padded sizes agree
    (:mod:`.stacked.plan`). Returns, per run,
    ``{epoch: tagger}`` for each epoch of its keys (see :func:`build_epochs`).
    """
    out: list[dict[int, NERTagger] | None] = [None] * len(runs)
    # a fixed thread count: the same weights whatever the core count (the cache key has none)
    with training.torch_threads(threads if device.type == "cpu" else None):
        prepared = []
        for dataset, seed, keys in runs:
            vocab = Vocabulary.from_dataset(dataset, config.extra_tokens)
            encode = lambda items, vocab=vocab: [(vocab.token_ids(u.tokens), vocab.tag_ids(u.tags))  # noqa: E731
                                                 for u in items]
            with training.seeded(seed, device):
                net = NERTaggerNet(vocab, config).to(device)
                noise_seed = stacked_params.noise_seed()
            prepared.append(dict(dataset=dataset, seed=seed, keys=keys, vocab=vocab, net=net, noise_seed=noise_seed,
                                 width=dataset_width(dataset), train=encode(dataset.train),
                                 valid=encode(dataset.valid), snapshots={},
                                 unk=unk_probabilities(vocab, dataset.train, config.unk_alpha, device)))
        sized = ("embedding.weight",)                                          # rows padded in a stack
        for group in stack_groups([r["net"] for r in prepared], [(len(r["train"]), r["width"]) for r in prepared],
                                  sized):
            members = [prepared[i] for i in group]
            rows = padded_rows(len(members[0]["vocab"].tokens))
            unk = ([torch.nn.functional.pad(r["unk"], (0, rows - len(r["unk"]))) for r in members]
                   if config.unk_alpha > 0.0 else [None] * len(members))

            def snapshot(j: int, state: dict, row: dict, members=members) -> None:
                if row["epoch"] in members[j]["keys"] and row["epoch"] != config.epochs:
                    members[j]["snapshots"][row["epoch"]] = state

            histories = fit_stacked(
                [r["net"] for r in members],
                lambda params, batch, noise: stacked_tagger.losses(params, batch, noise, dropout=config.dropout),
                [stacked_tagger.encode(r["train"], r["width"], device, u) for r, u in zip(members, unk)],
                [stacked_tagger.encode(r["valid"], r["width"], device) for r in members], stacked_tagger.take,
                seeds=[r["seed"] for r in members], noise_seeds=[r["noise_seed"] for r in members],
                epochs=config.epochs, batch_size=config.batch_size, lr=config.lr, device=device,
                names=[f"{KIND} {r['keys'][config.epochs][:8]}" for r in members],
                early_stopping=config.early_stopping, patience=config.patience, grad_clip=config.grad_clip or None,
                progress=progress, optimizer=config.optimizer, momentum=config.momentum, lr_decay=config.lr_decay,
                after_backward=stacked_tagger.zero_padding_row,
                on_epoch=snapshot if any(len(r["keys"]) > 1 for r in members) else None, vocabulary_sized=sized)
            for index, run, history in zip(group, members, histories):
                out[index] = _epoch_targets(run, history, config, device)
    return out


def _epoch_targets(run: dict, history: training.TrainingHistory, config: NERTaggerConfig,
                   device: torch.device) -> dict[int, NERTagger]:
    """``{epoch: tagger}`` of one trained run: its final network and the snapshots of its checkpoint epochs."""
    vocab, dataset, keys = run["vocab"], run["dataset"], run["keys"]
    snapshots = {**run["snapshots"], config.epochs: None}
    out = {}
    for epoch, state in snapshots.items():
        cfg = dataclasses.replace(config, epochs=epoch) if epoch != config.epochs else config
        at = run["net"]
        if state is not None:
            at = NERTaggerNet(vocab, cfg).to(device)
            stacked_params.load_model_state(at, state)
        finish_unk_rows(at.embedding.weight, vocab, dataset.train, config.unk_alpha)
        hist = training.history_until(history, epoch) if epoch != config.epochs else history
        target = NERTagger(at, vocab, cfg, seed=run["seed"], history=hist, content_hash=keys[epoch])
        target.facts.update(_split_f1(target, dataset))
        out[epoch] = target
    return out


def build(dataset, config: NERTaggerConfig, *, device: torch.device, seed: int, content_hash: str,
          progress: bool = True, threads: int | None = 1) -> NERTagger:
    """Train a fresh tagger on ``device`` (no cache)."""
    return build_epochs(dataset, config, device=device, seed=seed, keys={config.epochs: content_hash},
                        progress=progress, threads=threads)[config.epochs]


def train(dataset, *, device: str = "cpu", cache=None, seed: int = 0, progress: bool = True,
          threads: int | None = 1, checkpoints=(), **config) -> NERTagger:
    """Train (or load from ``cache``) the tagger; ``config`` keys are :class:`NERTaggerConfig` fields.

    ``threads`` caps torch's CPU threads while training (1: the same weights on
    any core count; ``None`` leaves torch's setting); not part of the cache key.
    ``checkpoints``: epochs to keep from the same training
    (:meth:`NERTagger.at_epoch`), each cached as the training stopped there.
    """
    if checkpoints:
        epochs = training.train_or_load_epochs(
            KIND, NERTaggerConfig, config, dataset, device=device, cache=cache, seed=seed, checkpoints=checkpoints,
            build_epochs=lambda cfg, dev, keys: build_epochs(dataset, cfg, device=dev, seed=seed, keys=keys,
                                                             progress=progress, threads=threads),
            save=_save, load=lambda folder, dev: _load(folder, dev), progress=progress)
        final = epochs[max(epochs)]
        final.checkpoints = {e: t for e, t in epochs.items() if t is not final}
        if cache is not None:
            for t in final.checkpoints.values():
                mark_content_hash(t, t.content_hash)
        return final
    return training.train_or_load(
        KIND, NERTaggerConfig, config, dataset, device=device, cache=cache, seed=seed,
        build=lambda cfg, dev, key: build(dataset, cfg, device=dev, seed=seed, content_hash=key,
                                        progress=progress, threads=threads),
        save=_save, load=lambda folder, dev: _load(folder, dev), progress=progress)


def train_many(runs: Sequence[tuple], *, device: str = "cpu", cache=None, progress: bool = True,
               threads: int | None = 1, checkpoints=(), **config) -> list[NERTagger]:
    """:func:`train` for several ``(dataset, seed)`` runs of one config, those not in ``cache`` trained together
    (:func:`build_many_epochs`); each is cached under the key :func:`train` gives it. With ``checkpoints`` each
    run trains as a stack of one (:func:`train`), its checkpoints cached as there."""
    if checkpoints:
        return [train(dataset, device=device, cache=cache, seed=seed, progress=progress, threads=threads,
                      checkpoints=checkpoints, **config) for dataset, seed in runs]
    return training.train_or_load_many(
        KIND, NERTaggerConfig, config, runs, device=device, cache=cache,
        build_many=lambda cfg, dev, todo: [epochs[cfg.epochs] for epochs in build_many_epochs(
            [(dataset, seed, {cfg.epochs: key}) for dataset, seed, key in todo], cfg, device=dev,
            progress=progress, threads=threads)],
        save=_save, load=lambda folder, dev: _load(folder, dev), progress=progress)
