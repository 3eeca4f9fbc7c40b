"""The joint intent + slot target of canary-extraction-nlu §4.1, with the defences of §6.

Architecture (§4.1, a CLC model after Ma & Hovy 2016): input embeddings ->
2 BiLSTM layers -> (a) intent head: max-pool of the top BiLSTM outputs over
time, a linear layer and softmax cross-entropy; (b) tag head: a linear layer
giving emissions to a CRF (pytorch-crf). The training loss of an utterance is
intent cross-entropy + CRF negative log-likelihood (§4.1: "the sum of the
respective cross-entropy and CRF loss").

Departures from the paper, and why:

* Word embeddings are trained from scratch: the paper's FastText vectors
  cannot be downloaded here, and a from-scratch table is what the attack
  optimises over anyway (W is whatever the network reads).
* The intent head pools by max over time (the paper does not say how the
  BiLSTM states reach the fully connected layer).
* Sizes and epochs default small (:class:`JointNLUConfig`) so that CI trains
  a model in seconds on a CPU while it still memorises a 4-digit pin
  repeated 100 times.

Defences (§6) are config switches: ``dropout`` (paper: 0.2 and 0.1; applied to
the input embeddings, between the LSTM layers and to the LSTM outputs),
``early_stopping`` (patience 20 epochs on the validation loss, best weights
restored) and ``char_embeddings`` (a character CNN concatenated to the word
embedding); and one the paper does not use, ``unk_alpha`` (word dropout,
Kiperwasser & Goldberg 2016: 0.25; :mod:`.unk_training`). The default has
none of them: the undefended target is the paper's model. The character features of a word always come from its own
letters, whether or not the word is in the vocabulary (Ma & Hovy 2016: the
point of the CNN is to represent words the table lacks); only its word vector
falls back to ``<unk>``. :meth:`JointNLUTarget.input_embeddings` returns, per
vocabulary word, its word vector concatenated with the CNN output over its
own characters, and a soft input ``W^T a`` (§3.1, eq. 2) is a mixture of
whole-token representations.

Vocabulary and ``<unk>`` (:mod:`.vocab`, :mod:`.unk_training`): the
vocabulary holds the training tokens, every built-in canary pattern's tokens,
those of patterns injected with ``inject_canaries`` and ``extra_tokens``.
After training, the ``<unk>`` word vector is the mean of the rarest training
words' vectors (nothing is trained for it, so it changes nothing the model
memorised), and reserved tokens the training split never has read it. With
word dropout (``unk_alpha > 0``, a defence) an occurrence of a training token
seen ``#(w)`` times reads ``<unk>`` with probability
``unk_alpha / (unk_alpha + #(w))`` and the ``<unk>`` row is trained instead.

Measured before issue 12 (no word dropout, vocabulary of training tokens
only) on the default synthetic corpus (1500 utterances + a 4-digit pin
injected R=100 times, default config, 1 CPU thread): the true pin has the
lowest loss of all 10^4 pins from epoch 3 on (loss gap to the median pin
about 7 nats after 6 epochs). With dropout 0.2 + character embeddings the gap
shrinks to about 0.2 nats but the pin still ranks first, and early stopping
(patience 20) never fires there because the validation loss, which contains
the canary's validation copies, keeps falling. The §6 defences blunt the
gradient attack; they do not hide a 100-times repeated pin from exhaustive
scoring. (The paper's defence results concern the gradient attack of §3.1;
that attack lives in ``attacks/cea/attack.py`` and was not measured here.)

DP-SGD (``dp={"epsilon": 8, "delta": 1e-5, "max_grad_norm": 1.0}``, not in
the paper, whose §7 names differential privacy as future work) trains the same
network through Opacus (:mod:`pytest_privleak.targets.dp_sgd.opacus`): the
BiLSTM as Opacus's ``DPLSTM`` (same weights and maths, copied back into
``nn.LSTM``), the CRF with the exact per-sentence grad sampler of
:mod:`pytest_privleak.targets.dp_sgd.crf`. ``dp=None``, the default, is the paper's model.
"""
from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
from torchcrf import CRF

from .dp_sgd.opacus import DPConfig, dp_config
from . import training
from .base import TrainedTarget
from .char_cnn import CharCNN
from .stacked import joint as stacked_joint
from .stacked import params as stacked_params
from .stacked.loop import fit_stacked
from .stacked.plan import padded_rows, stack_groups
from .unk_training import (DEFAULT_UNK_ALPHA, check_unk_alpha, drop_to_unk, finish_unk_rows, rare_word_rows,
                           set_unk_row, unk_probabilities)
from .vocab import PAD, PAD_ID, UNK, Vocabulary, check_extra_tokens

KIND = "joint-bilstm-crf"


# What the DP-SGD guarantee of this target covers (review H4): the vocabulary and the <unk> row are read from the
# training data outside DP-SGD, so a word found in one record only is in the released model exactly when that
# record was trained on. The (epsilon, delta) is of the weights given the vocabulary, not of the released model.
DP_COVERS = ("the weights given the vocabulary: the vocabulary and the <unk> row are read from the training data "
             "outside DP-SGD, so a word only one record holds reveals that record's membership")


@dataclass(frozen=True)
class JointNLUConfig:
    """Hyper-parameters of the joint model; defaults are the undefended CI-sized model.

    Paper defence values (§6): ``dropout=0.2`` (or 0.1), ``early_stopping=True``
    with ``patience=20``, ``char_embeddings=True``. ``epochs`` caps training
    also under early stopping, which can only fire when ``epochs > patience``:
    give e.g. ``epochs=100`` with ``early_stopping=True``.

    ``extra_tokens``: tokens the vocabulary must hold besides the training
    split's and the canary patterns' (e.g. a custom pattern's V0 when the data
    was not built with ``inject_canaries``). ``unk_alpha``: word dropout, a
    defence (WD, not in the paper; Kiperwasser & Goldberg 2016: 0.25), a token
    seen ``#(w)`` times in training reads ``<unk>`` with probability
    ``unk_alpha / (unk_alpha + #(w))`` (:mod:`.unk_training`); 0, the default,
    is the paper's model. ``dp``: train with DP-SGD at this ``(epsilon, delta)``
    and per-sample clipping norm (:func:`~pytest_privleak.targets.dp_sgd.opacus.dp_config`);
    None, the default, trains without DP.
    """

    epochs: int = 10                 # maximum number of epochs
    batch_size: int = 64
    lr: float = 5e-3                 # Adam
    embedding_dim: int = 64
    hidden_dim: int = 64             # per direction
    dropout: float = 0.0             # §6 defence D
    early_stopping: bool = False     # §6 defence ES
    patience: int = 20               # §6: 20 epochs without a better validation loss
    char_embeddings: bool = False    # §6 defence CE
    char_dim: int = 16
    char_filters: int = 32
    char_kernel: int = 3
    max_word_chars: int = 20
    grad_clip: float = 5.0
    extra_tokens: tuple[str, ...] = ()
    unk_alpha: float = DEFAULT_UNK_ALPHA    # defence WD: word dropout to <unk> (0: off, the paper's model)
    dp: DPConfig | None = None       # DP-SGD (a dict {epsilon, delta, max_grad_norm}); None: no DP

    def __post_init__(self) -> None:
        object.__setattr__(self, "dp", dp_config(self.dp, kind=KIND))
        object.__setattr__(self, "extra_tokens", check_extra_tokens(self.extra_tokens))
        check_unk_alpha(self.unk_alpha)
        training.check_training_config(
            self, ("epochs", "batch_size", "embedding_dim", "hidden_dim", "patience", "char_dim", "char_filters",
                   "char_kernel", "max_word_chars"),
            flags=("early_stopping", "char_embeddings"), dropout_hint=" (paper: 0.2 or 0.1)")
        if self.char_kernel % 2 == 0:
            raise ValueError(f"config char_kernel={self.char_kernel} must be odd (same-length convolution)")

    def to_json(self) -> dict:
        """The config's fields as JSON; ``dp`` only when set (a non-DP record reads as it did before DP)."""
        data = dataclasses.asdict(self)
        if data["dp"] is None:
            del data["dp"]
        return data


class SentenceCRF(CRF):
    """pytorch-crf's CRF called with tensors only, ``crf(emissions, tags, mask) -> [B]`` log-likelihoods.

    The same computation as ``CRF(..., reduction="none")``; tensor-only
    arguments let DP-SGD read the mask of each sentence (a forward hook never
    sees keyword arguments; :mod:`pytest_privleak.targets.dp_sgd.crf`). Its weights
    are named as the plain CRF's.
    """

    def forward(self, emissions: torch.Tensor, tags: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return super().forward(emissions, tags, mask=mask, reduction="none")


class JointNLUNet(nn.Module):
    """Embeddings -> 2 BiLSTM layers -> intent head (max-pool + linear) and CRF tag head (§4.1)."""

    def __init__(self, vocab: Vocabulary, config: JointNLUConfig) -> None:
        super().__init__()
        self.word_embedding = nn.Embedding(len(vocab.tokens), config.embedding_dim, padding_idx=PAD_ID)
        input_dim = config.embedding_dim
        self.char_cnn: CharCNN | None = None
        if config.char_embeddings:
            # Each vocabulary word's own characters (derived from the vocabulary, so not saved);
            # <pad> and <unk> have none: an unknown word brings its own (``embed(ids, chars)``).
            width = config.max_word_chars
            rows = [vocab.char_ids("" if t in (PAD, UNK) else t, width) for t in vocab.tokens]
            self.register_buffer("vocab_char_ids", torch.tensor(rows), persistent=False)
            self.char_cnn = CharCNN(len(vocab.chars), config.char_dim, config.char_filters, config.char_kernel)
            input_dim += config.char_filters
        self.input_dim = input_dim
        self.dropout = nn.Dropout(config.dropout)
        self.lstm = nn.LSTM(input_dim, config.hidden_dim, num_layers=2, bidirectional=True, batch_first=True,
                            dropout=config.dropout)
        self.intent_head = nn.Linear(2 * config.hidden_dim, len(vocab.intents))
        self.tag_head = nn.Linear(2 * config.hidden_dim, len(vocab.tags))
        self.crf = SentenceCRF(len(vocab.tags), batch_first=True)

    def embed(self, ids: torch.Tensor, chars: torch.Tensor | None = None) -> torch.Tensor:
        """``[B, L]`` token ids -> ``[B, L, d]``: word vectors, with CE + the CNN over each word's characters.

        ``chars [B, L, C]`` are the character ids of the words as written (an
        unknown word has ``<unk>``'s id but its own letters); ``None`` takes the
        characters of the vocabulary word of each id, giving rows of
        :meth:`embedding_table`.
        """
        words = self.word_embedding(ids)
        if self.char_cnn is None:
            return words
        if chars is None:
            unique, inverse = torch.unique(ids, return_inverse=True)
            char_vectors = self.char_cnn(self.vocab_char_ids[unique])[inverse]
        else:
            flat = chars.reshape(-1, chars.shape[-1])
            unique, inverse = torch.unique(flat, dim=0, return_inverse=True)
            char_vectors = self.char_cnn(unique)[inverse].view(*ids.shape, -1)
        return torch.cat([words, char_vectors], dim=-1)

    def embedding_table(self) -> torch.Tensor:
        """``[|V|, d]``: what the network reads for each vocabulary token."""
        if self.char_cnn is None:
            return self.word_embedding.weight
        return torch.cat([self.word_embedding.weight, self.char_cnn(self.vocab_char_ids)], dim=-1)

    def heads(self, x: torch.Tensor, mask: torch.Tensor, lengths: torch.Tensor | None, *,
              sorted_lengths: bool = False):
        """Intent logits ``[B, n_intents]`` and tag emissions ``[B, L, n_tags]`` from embeddings.

        ``sorted_lengths``: the rows come longest first and are packed as they
        are (DP-SGD's batches, :func:`dp_batch_loss`); otherwise packing sorts them.
        """
        x = self.dropout(x)
        if lengths is None:
            hidden, _ = self.lstm(x)
        else:
            packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=sorted_lengths)
            hidden, _ = pad_packed_sequence(self.lstm(packed)[0], batch_first=True, total_length=x.shape[1])
        hidden = self.dropout(hidden)
        pooled = hidden.masked_fill(~mask.unsqueeze(-1), float("-inf")).amax(dim=1)
        return self.intent_head(pooled), self.tag_head(hidden)

    def loss(self, x: torch.Tensor, mask: torch.Tensor, intents: torch.Tensor, tags: torch.Tensor,
             lengths: torch.Tensor | None = None, *, sorted_lengths: bool = False) -> torch.Tensor:
        """Per-utterance training loss ``[B]``: intent cross-entropy + CRF NLL (§4.1)."""
        intent_logits, emissions = self.heads(x, mask, lengths, sorted_lengths=sorted_lengths)
        ce = nn.functional.cross_entropy(intent_logits, intents, reduction="none")
        return ce - self.crf(emissions, tags, mask)


# --------------------------------------------------------------------------- batches

@dataclass
class Batch:
    ids: torch.Tensor        # [B, L] long
    tags: torch.Tensor       # [B, L] long (0 at padding)
    intents: torch.Tensor    # [B] long
    mask: torch.Tensor       # [B, L] bool
    lengths: torch.Tensor | None  # CPU lengths when rows differ in length, else None
    chars: torch.Tensor | None = None  # [B, L, C] character ids of the words as written (CE only)


def encode_utterances(vocab: Vocabulary, utterances: Sequence, char_width: int | None = None) -> list[tuple]:
    """(token ids, tag ids, intent id, character ids) per utterance; unknown tokens read ``<unk>``.

    Character ids (``char_width`` per word) are those of each word's own
    letters; ``None`` when ``char_width`` is None (a model without CE).
    """
    return [(vocab.token_ids(u.tokens), vocab.tag_ids(u.tags), vocab.intent_id(u.intent),
             None if char_width is None else [vocab.char_ids(t, char_width) for t in u.tokens])
            for u in utterances]


def collate(items: Sequence[tuple], device: torch.device) -> Batch:
    lengths = [len(item[0]) for item in items]
    width = max(lengths)
    ids = torch.full((len(items), width), PAD_ID, dtype=torch.long)
    tags = torch.zeros((len(items), width), dtype=torch.long)
    for row, (tok, tag, *_) in enumerate(items):
        ids[row, :len(tok)] = torch.tensor(tok)
        tags[row, :len(tag)] = torch.tensor(tag)
    chars = None
    if len(items[0]) > 3 and items[0][3] is not None:
        chars = torch.full((len(items), width, len(items[0][3][0])), PAD_ID, dtype=torch.long)
        for row, item in enumerate(items):
            chars[row, :len(item[3])] = torch.tensor(item[3])
        chars = chars.to(device)
    length_tensor = torch.tensor(lengths)
    mask = torch.arange(width).unsqueeze(0) < length_tensor.unsqueeze(1)
    intents = torch.tensor([item[2] for item in items], dtype=torch.long)
    ragged = min(lengths) != width
    return Batch(ids.to(device), tags.to(device), intents.to(device), mask.to(device),
                 length_tensor if ragged else None, chars)


def batch_loss(net: JointNLUNet, batch: Batch, *, sorted_lengths: bool = False) -> torch.Tensor:
    return net.loss(net.embed(batch.ids, batch.chars), batch.mask, batch.intents, batch.tags, batch.lengths,
                    sorted_lengths=sorted_lengths)


def longest_first(batch: Batch) -> Batch:
    """The batch's rows reordered longest first (ties keep their order); a batch of one length is returned as is."""
    if batch.lengths is None:
        return batch
    order = sorted(range(len(batch.lengths)), key=lambda i: -int(batch.lengths[i]))
    index = torch.tensor(order, device=batch.ids.device)
    return Batch(batch.ids[index], batch.tags[index], batch.intents[index], batch.mask[index],
                 batch.lengths[torch.tensor(order)], None if batch.chars is None else batch.chars[index])


def dp_batch_loss(net: JointNLUNet, batch: Batch) -> torch.Tensor:
    """Per-utterance losses of a DP-SGD batch: rows longest first, packed without reordering.

    Opacus 1.6's ``DPLSTM`` returns its outputs in the batch's order, but its
    per-sample gradients in the packed order (longest first): a batch packed
    with ``enforce_sorted=False`` would clip and sum the LSTM gradient of one
    utterance with the other layers' gradients of another (measured: rows
    swapped). Sorting first makes the packed order the batch order.
    """
    return batch_loss(net, longest_first(batch), sorted_lengths=True)


def char_width(config: JointNLUConfig) -> int | None:
    """Characters per word in batches: ``max_word_chars`` with CE, else None (no character ids)."""
    return config.max_word_chars if config.char_embeddings else None


def _length_groups(utterances: Sequence, chunk: int) -> list[list[int]]:
    """Indices grouped by utterance length (no padding inside a group), each split into chunks."""
    groups: dict[int, list[int]] = defaultdict(list)
    for i, u in enumerate(utterances):
        groups[len(u.tokens)].append(i)
    return [idx[i:i + chunk] for _, idx in sorted(groups.items()) for i in range(0, len(idx), chunk)]


# --------------------------------------------------------------------------- target

class JointNLUTarget(TrainedTarget):
    """A trained joint model; implements ``SoftInputModel`` and ``SequenceScorer`` (protocols.py).

    Weights are frozen and the network stays in evaluation mode.
    """

    kind = KIND
    device_parameter = "word_embedding.weight"
    described_epochs = ("best_epoch", "stopped_epoch")
    repr_epochs = ("stopped_epoch",)

    def __init__(self, net: JointNLUNet, vocab: Vocabulary, config: JointNLUConfig, *, seed: int,
                 history: training.TrainingHistory, content_hash: str, loaded_from_cache: bool = False,
                 score_chunk: int = 4096, threads: int | None = 1) -> None:
        super().__init__(net, vocab, config, seed=seed, history=history, content_hash=content_hash,
                         loaded_from_cache=loaded_from_cache)
        self.vocabulary: list[str] = list(vocab.tokens)
        #: Per-epoch rows ``{epoch, train_loss, valid_loss, seconds}``.
        self.history: list[dict] = history.epochs
        self.score_chunk = score_chunk
        #: torch CPU threads for ``score``, ``score_token_ids`` and ``evaluate`` (None: leave torch's
        #: setting); 1 by default because these small batched passes are overhead-bound and two
        #: threads on a busy shared machine were measured 40x slower than one.
        self.threads = threads

    def _threads(self):
        return training.torch_threads(self.threads if self.device.type == "cpu" else None)

    def describe(self) -> dict:
        """The base facts, plus ``dp`` (config, noise, epsilon spent) for a DP-SGD model."""
        facts = super().describe()
        if self.training_history.dp is not None:
            facts["dp"] = {**self.training_history.dp, "covers": DP_COVERS}
        return facts

    # -- ids -----------------------------------------------------------------
    def token_ids(self, tokens: Sequence[str], *, strict: bool = True) -> list[int]:
        """Vocabulary ids; ``strict`` raises ``OutOfVocabularyError`` naming an unknown token."""
        return self.vocab.token_ids(tokens, strict=strict)

    def _labels(self, intents, tags, batch: int, length: int) -> tuple[torch.Tensor, torch.Tensor]:
        if isinstance(intents, str):
            intents = [intents] * batch
        if len(tags) and isinstance(tags[0], str):
            tags = [tags] * batch
        if len(intents) != batch or len(tags) != batch:
            raise ValueError(f"got {len(intents)} intents and {len(tags)} tag rows for a batch of {batch}; "
                             "give one per row (or a single intent / tag sequence shared by all rows)")
        for row, t in enumerate(tags):
            if len(t) != length:
                raise ValueError(f"tags[{row}] has {len(t)} tags for sequences of length {length}")
        device = self.device
        intent_ids = torch.tensor([self.vocab.intent_id(i) for i in intents], dtype=torch.long, device=device)
        tag_ids = torch.tensor([self.vocab.tag_ids(t) for t in tags], dtype=torch.long, device=device)
        return intent_ids, tag_ids

    # -- SoftInputModel --------------------------------------------------------
    def input_embeddings(self) -> torch.Tensor:
        """``[|V|, d]`` rows read for each token (word vector, + char-CNN vector with CE)."""
        with torch.no_grad():
            return self.net.embedding_table().detach().clone()

    def loss_from_embeddings(self, embeddings: torch.Tensor, intents: Sequence[str] | str,
                             tags: Sequence[Sequence[str]] | Sequence[str]) -> torch.Tensor:
        """Per-row training loss ``[B]`` of ``[B, L, d]`` inputs with known labels (§3.1, eq. 1).

        Differentiable with respect to ``embeddings`` only; a single intent or tag
        sequence is shared by all rows.
        """
        if embeddings.dim() != 3 or embeddings.shape[-1] != self.net.input_dim:
            raise ValueError(f"embeddings must be [B, L, {self.net.input_dim}], got {list(embeddings.shape)}")
        batch, length, _ = embeddings.shape
        intent_ids, tag_ids = self._labels(intents, tags, batch, length)
        mask = torch.ones((batch, length), dtype=torch.bool, device=embeddings.device)
        return self.net.loss(embeddings, mask, intent_ids, tag_ids)

    # -- SequenceScorer --------------------------------------------------------
    @torch.no_grad()
    def score_token_ids(self, ids: torch.Tensor, intent: str, tags: Sequence[str]) -> torch.Tensor:
        """Training loss ``[B]`` of same-length candidates ``ids [B, L]`` sharing one intent and tag sequence."""
        if ids.dim() != 2:
            raise ValueError(f"ids must be [B, L], got {list(ids.shape)}")
        with self._threads():
            return self._score_ids(ids.to(self.device), intent, tags)

    def _score_ids(self, ids: torch.Tensor, intent: str, tags: Sequence[str]) -> torch.Tensor:
        out = []
        intent_ids, tag_ids = self._labels(intent, tags, 1, ids.shape[1])
        for start in range(0, ids.shape[0], self.score_chunk):
            chunk = ids[start:start + self.score_chunk]
            b, length = chunk.shape
            mask = torch.ones((b, length), dtype=torch.bool, device=chunk.device)
            out.append(self.net.loss(self.net.embed(chunk), mask, intent_ids.expand(b), tag_ids.expand(b, -1)))
        return torch.cat(out)

    @torch.no_grad()
    def score(self, utterances: Sequence) -> np.ndarray:
        """Per-utterance training loss (lower = more likely), batched by length; unknown tokens -> ``<unk>``."""
        scores = np.empty(len(utterances), dtype=np.float64)
        encoded = encode_utterances(self.vocab, utterances, char_width(self.config))
        with self._threads():
            for group in _length_groups(utterances, self.score_chunk):
                batch = collate([encoded[i] for i in group], self.device)
                scores[group] = batch_loss(self.net, batch).double().cpu().numpy()
        return scores

    @torch.no_grad()
    def evaluate(self, utterances: Sequence) -> dict[str, float]:
        """Intent accuracy and slot token accuracy (CRF Viterbi tags) over ``utterances``."""
        if not utterances:
            raise ValueError("evaluate() needs at least one utterance")
        encoded = encode_utterances(self.vocab, utterances, char_width(self.config))
        intent_hits = tag_hits = tag_total = 0
        with self._threads():
            for group in _length_groups(utterances, self.score_chunk):
                batch = collate([encoded[i] for i in group], self.device)
                intent_logits, emissions = self.net.heads(self.net.embed(batch.ids, batch.chars), batch.mask, None)
                intent_hits += int((intent_logits.argmax(-1) == batch.intents).sum())
                predicted = torch.tensor(self.net.crf.decode(emissions, mask=batch.mask), device=self.device)
                tag_hits += int((predicted == batch.tags).sum())
                tag_total += batch.tags.numel()
        return {"intent_accuracy": intent_hits / len(utterances), "slot_accuracy": tag_hits / tag_total,
                "n": len(utterances)}


# --------------------------------------------------------------------------- train / cache

def _save(target: JointNLUTarget, folder: Path) -> dict:
    return training.save_target(folder, KIND, target, target.training_history,
                                best_epoch=target.best_epoch, stopped_epoch=target.stopped_epoch)


def _load(folder: Path, device: torch.device, threads: int | None = 1) -> JointNLUTarget:
    tensors, record = training.load_entry(folder, str(device))
    try:
        vocab = Vocabulary.from_json(record["vocab"])
        config = JointNLUConfig(**record["config"])
        net = JointNLUNet(vocab, config).to(device)
        net.load_state_dict(tensors, strict=True)
        history = training.TrainingHistory.from_json(record["history"])
        return JointNLUTarget(net, vocab, config, seed=record["seed"], history=history,
                              content_hash=record["content_hash"], loaded_from_cache=True, threads=threads)
    except (KeyError, TypeError, ValueError, RuntimeError) as exc:
        raise training.CorruptEntryError(f"cache entry {folder} does not rebuild a {KIND} model: {exc}") from exc


def build(dataset, config: JointNLUConfig, *, device: torch.device, seed: int, content_hash: str,
          progress: bool = True, threads: int | None = 1) -> JointNLUTarget:
    """Train a fresh model on ``device`` (no cache): a stack of one (:func:`build_many`)."""
    return build_many([(dataset, seed, content_hash)], config, device=device, progress=progress, threads=threads)[0]


@dataclass
class _Run:
    """What one model of a stacked training needs: its data, vocabulary, initialised network and noise seed."""

    dataset: object
    seed: int
    content_hash: str
    vocab: Vocabulary
    train_items: list
    valid_items: list
    unk_probs: torch.Tensor
    rare: torch.Tensor | None
    net: JointNLUNet
    noise_seed: int

    @property
    def width(self) -> int:
        """Tokens every batch of this model is padded to: the longest utterance of its dataset (all splits)."""
        return max(len(u.tokens) for split in (self.dataset.train, self.dataset.valid, self.dataset.test)
                   for u in split)


def _prepare(dataset, config: JointNLUConfig, seed: int, content_hash: str, device: torch.device) -> _Run:
    vocab = Vocabulary.from_dataset(dataset, config.extra_tokens)
    width = char_width(config)
    with training.seeded(seed, device):
        net = JointNLUNet(vocab, config).to(device)
        noise_seed = stacked_params.noise_seed()
    return _Run(dataset, seed, content_hash, vocab, encode_utterances(vocab, dataset.train, width),
                encode_utterances(vocab, dataset.valid, width),
                unk_probabilities(vocab, dataset.train, config.unk_alpha, device),
                rare_word_rows(vocab, dataset.train) if config.unk_alpha == 0.0 else None, net, noise_seed)


def build_many(runs: Sequence[tuple], config: JointNLUConfig, *, device: torch.device, progress: bool = True,
               threads: int | None = 1) -> list[JointNLUTarget]:
    """Train fresh models, one per ``(dataset, seed, content_hash)`` of ``runs``, stacked (:mod:`.stacked`).

    Each model is initialised under its seed as a model trained alone, and
    trains with its own data order, dropout and word dropout; models whose
    vocabularies differ in size stack when their padded sizes agree
    (:mod:`.stacked.plan`). Word dropout to
    ``<unk>`` per ``config.unk_alpha``; the ``<unk>`` row is set from the rare
    words before each validation pass and after training. DP-SGD
    (``config.dp``) trains each model alone through Opacus.
    """
    if config.dp is not None:
        return [_build_dp(dataset, config, device=device, seed=seed, content_hash=key, progress=progress,
                          threads=threads) for dataset, seed, key in runs]
    out: list[JointNLUTarget | None] = [None] * len(runs)
    with training.torch_threads(threads if device.type == "cpu" else None):
        prepared = [_prepare(dataset, config, seed, key, device) for dataset, seed, key in runs]
        sized = ("word_embedding.weight", "char_cnn.embedding.weight")       # rows padded in a stack
        for group in stack_groups([r.net for r in prepared], [(len(r.train_items), r.width) for r in prepared],
                                  sized):
            members = [prepared[i] for i in group]
            rows = padded_rows(len(members[0].vocab.tokens))
            unk = ([torch.nn.functional.pad(r.unk_probs, (0, rows - len(r.unk_probs))) for r in members]
                   if config.unk_alpha > 0.0 else [None] * len(members))

            def before_validation(params: dict, models: Sequence[int], members=members) -> None:
                for row, j in enumerate(models):
                    if members[j].rare is not None:
                        set_unk_row(params["word_embedding.weight"][row], members[j].rare)

            histories = fit_stacked(
                [r.net for r in members],
                lambda params, batch, noise: stacked_joint.losses(params, batch, noise, dropout=config.dropout),
                [stacked_joint.encode(r.train_items, r.width, device, u) for r, u in zip(members, unk)],
                [stacked_joint.encode(r.valid_items, r.width, device) for r in members], stacked_joint.take,
                seeds=[r.seed for r in members], noise_seeds=[r.noise_seed for r in members],
                epochs=config.epochs, batch_size=config.batch_size, lr=config.lr, device=device,
                names=[f"{KIND} {r.content_hash[:8]}" for r in members], early_stopping=config.early_stopping,
                patience=config.patience, grad_clip=config.grad_clip or None, progress=progress,
                after_backward=stacked_joint.zero_padding_row, before_validation=before_validation,
                vocabulary_sized=sized)
            for index, run, history in zip(group, members, histories):
                finish_unk_rows(run.net.word_embedding.weight, run.vocab, run.dataset.train, config.unk_alpha)
                out[index] = JointNLUTarget(run.net, run.vocab, config, seed=run.seed, history=history,
                                            content_hash=run.content_hash, threads=threads)
    return out


def _build_dp(dataset, config: JointNLUConfig, *, device: torch.device, seed: int, content_hash: str,
              progress: bool = True, threads: int | None = 1) -> JointNLUTarget:
    """Train one model with DP-SGD through Opacus (``config.dp``): per-sample clipping and noise, one model."""
    vocab = Vocabulary.from_dataset(dataset, config.extra_tokens)
    width = char_width(config)
    train_items = encode_utterances(vocab, dataset.train, width)
    valid_items = encode_utterances(vocab, dataset.valid, width)
    unk_probs = unk_probabilities(vocab, dataset.train, config.unk_alpha, device)
    rare = rare_word_rows(vocab, dataset.train) if config.unk_alpha == 0.0 else None

    def training_loss(net: JointNLUNet, batch: Batch) -> torch.Tensor:
        if net.training:  # word vectors only: with CE a replaced word keeps its own characters
            batch = dataclasses.replace(batch, ids=drop_to_unk(batch.ids, unk_probs))
        elif rare is not None:  # validation reads <unk> as the returned model will (no gradient reaches it)
            set_unk_row(net.word_embedding.weight, rare)
        return dp_batch_loss(net, batch)

    with training.seeded(seed, device), training.torch_threads(threads if device.type == "cpu" else None):
        net = JointNLUNet(vocab, config).to(device)
        history = training.fit(
            net, training_loss, train_items, valid_items, lambda items: collate(items, device),
            epochs=config.epochs, batch_size=config.batch_size, lr=config.lr, seed=seed,
            early_stopping=config.early_stopping, patience=config.patience, grad_clip=config.grad_clip or None,
            name=f"{KIND} {content_hash[:8]}", progress=progress, dp=config.dp)
        finish_unk_rows(net.word_embedding.weight, vocab, dataset.train, config.unk_alpha)
    return JointNLUTarget(net, vocab, config, seed=seed, history=history, content_hash=content_hash,
                          threads=threads)


def train(dataset, *, device: str = "cpu", cache=None, seed: int = 0, progress: bool = True,
          threads: int | None = 1, **config) -> JointNLUTarget:
    """Train (or load from ``cache``) the §4.1 joint model; ``config`` keys are :class:`JointNLUConfig` fields.

    ``progress`` prints one line per epoch on stderr; ``threads`` caps torch's
    CPU threads while training and in the target's ``score``/``evaluate``
    (see :func:`training.torch_threads`; ``None`` leaves torch's setting).
    Neither is part of the cache key.
    """
    return training.train_or_load(
        KIND, JointNLUConfig, config, dataset, device=device, cache=cache, seed=seed,
        build=lambda cfg, dev, key: build(dataset, cfg, device=dev, seed=seed, content_hash=key, progress=progress,
                                        threads=threads),
        save=_save, load=lambda folder, dev: _load(folder, dev, threads), progress=progress)


def train_many(runs: Sequence[tuple], *, device: str = "cpu", cache=None, progress: bool = True,
               threads: int | None = 1, **config) -> list[JointNLUTarget]:
    """:func:`train` for several ``(dataset, seed)`` runs of one config, those not in ``cache`` trained together
    (:func:`build_many`); each is cached under the key :func:`train` gives it."""
    return training.train_or_load_many(
        KIND, JointNLUConfig, config, runs, device=device, cache=cache,
        build_many=lambda cfg, dev, todo: build_many(todo, cfg, device=dev, progress=progress, threads=threads),
        save=_save, load=lambda folder, dev: _load(folder, dev, threads), progress=progress)
