"""What each attack needs of a model: small protocols, not our own classes.

A user adapts their model with a few lines; our built-in targets implement
these too. Torch appears only in annotations, so importing this module is cheap.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, Sequence, runtime_checkable

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np
    import torch

    from .data.types import Utterance


class OutOfVocabularyError(ValueError):
    """A canary token has no row in the model's embedding matrix, so no attack can feed it.

    Raised by the adapters and the attacks alike, so it lives beside the protocols both use.
    """


@runtime_checkable
class SoftInputModel(Protocol):
    """Open-box NLU model for canary extraction (canary-extraction-nlu §3).

    ``vocabulary[i]`` names row ``i`` of :meth:`input_embeddings`, the matrix
    ``W`` whose rows are what the network reads for each token (for a model
    with character features, the word vector concatenated with the character
    representation of that word). The attack feeds ``W^T a`` (eq. 2) into
    :meth:`loss_from_embeddings` and needs gradients with respect to it only.
    """

    vocabulary: Sequence[str]

    def input_embeddings(self) -> "torch.Tensor":
        """``[|V|, d]`` float tensor on the model's device, detached from training."""

    def loss_from_embeddings(self, embeddings: "torch.Tensor", intents: Sequence[str],
                             tags: Sequence[Sequence[str]]) -> "torch.Tensor":
        """Per-row training loss ``[B]`` for inputs ``[B, L, d]`` and their known labels.

        Rows share one length ``L``; the model is in evaluation mode and its
        weights frozen; the result is differentiable with respect to ``embeddings``.
        """


@runtime_checkable
class SequenceScorer(Protocol):
    """Scores whole utterances; lower means the model finds it more likely (exposure)."""

    def score(self, utterances: Sequence["Utterance"]) -> "np.ndarray":
        """``[N]`` float scores: log-perplexity for a language model, training loss for a classifier."""


@runtime_checkable
class SharedPrefixScorer(SequenceScorer, Protocol):
    """A sequence scorer that scores many sentences sharing one prefix without re-reading the prefix; optional.

    Exposure scores every secret of a canary's space (``10^6`` sentences for a
    6-digit number), all starting with the same words. A scorer with this
    method is handed the space batch by batch as word indices, never as
    sentences, so it can run the prefix through the model once: a recurrent
    model's state after the prefix (:func:`pytest_privleak.adapters.recurrent_prefix.prefix_outputs`),
    a transformer's key/value cache (:mod:`pytest_privleak.adapters.causal_prefix`).
    """

    def score_with_shared_prefix(self, prefix: Sequence[str], vocabulary: Sequence[str], choices: "np.ndarray", *,
                                 intent: str | None = None, tags: Sequence[str] | None = None) -> "np.ndarray":
        """``[B]`` scores: exactly what :meth:`score` gives the sentences ``prefix + [vocabulary[c] for c in row]``
        (one per row of the int array ``choices [B, n]``), labelled ``intent`` and ``tags`` (one tag per word of
        the sentence; a language model may ignore both), equal to float resolution.

        A scorer that takes neither keyword is called without them (the older three-argument form).
        """


@runtime_checkable
class TokenScorer(Protocol):
    """Per-token label probabilities (d-exposure; for a CRF, its marginals)."""

    labels: Sequence[str]

    def token_label_probs(self, sentences: Sequence[Sequence[str]]) -> list["np.ndarray"]:
        """For each sentence a ``[len, len(labels)]`` array of label probabilities."""


@runtime_checkable
class LogTokenScorer(TokenScorer, Protocol):
    """A token scorer that also gives log-probabilities; optional, d-exposure ranks on them when present.

    A probability near 1 saturates in float32 (a memorised label reads 1.0),
    while the log-probabilities of the other labels keep their precision.
    A :class:`TokenScorer` without this method is read through the log of
    ``token_label_probs``.
    """

    def token_label_log_probs(self, sentences: Sequence[Sequence[str]]) -> list["np.ndarray"]:
        """For each sentence a ``[len, len(labels)]`` array of label log-probabilities (``-inf`` for 0)."""


@runtime_checkable
class Encoder(Protocol):
    """Sentence encoder attacked through its embeddings."""

    def encode(self, texts: Sequence[str]) -> "np.ndarray":
        """``[N, d]`` embeddings."""


@runtime_checkable
class Mechanism(Protocol):
    """Local randomiser audited for its ε (hoho-attack-ome-ldp §2); built-ins in ``ldp.mechanisms``.

    ``epsilon`` is the claimed ε; ``domain`` describes the inputs the auditor
    may draw pairs from (``ldp.mechanisms.BoxDomain`` or ``FiniteDomain``).
    """

    epsilon: float
    domain: Any

    def __call__(self, inputs: "np.ndarray", rng: "np.random.Generator") -> "np.ndarray":
        """Randomise every row of ``inputs`` (``[N, ...]``) independently -> ``[N, out_dim]``."""


@runtime_checkable
class BitProductMechanism(Mechanism, Protocol):
    """A mechanism whose output bits are independent given the input (OME, SUE, OUE, RAPPOR).

    The white-box exact ε (``ldp.exact``) needs only these bit probabilities.
    """

    def bit_probabilities(self, inputs: "np.ndarray") -> "np.ndarray":
        """``[N, bits]`` array of Pr[bit = 1 | input]."""
