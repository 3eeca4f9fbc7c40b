"""What a built-in target reads for words it does not know, and word dropout as a named defence.

A vocabulary that keeps every training token never shows the network
``<unk>`` in training, so the ``<unk>`` row would stay at its random initial
value while a share of validation and test tokens (the unseen entities) read
it. The paper's model reads FastText vectors, which give such words a trained
vector (canary-extraction-nlu §4.1); a table trained from scratch needs a
stand-in, and it must not change what the model memorises: the undefended
target is the paper's model (issue 21).

Default (``unk_alpha=0``): no word dropout. After training (and before each
validation pass, so that the validation loss early stopping watches, §6, is
that of the model returned), :func:`set_unk_row_from_rare_words` sets the
``<unk>`` row to the mean of the rows of the rarest training words (those
seen at most as often as the :data:`RARE_SHARE` quantile of word-type
counts: the hapaxes on a real corpus). An unseen word is most like a rare one (Good-Turing: the chance of
a new word is estimated from the words seen once), which is also why
singleton replacement (Lample et al. 2016) trains ``<unk>`` on them; here it
is done after training, so no gradient step sees anything but the real data.

Word dropout (``unk_alpha > 0``) is a defence the user names, like the
paper's D / ES / CE (§6): during training an occurrence of a token seen
``#(w)`` times reads ``<unk>`` with probability ``alpha / (alpha + #(w))``
(Kiperwasser & Goldberg 2016, §6, ``alpha = 0.25``: a token seen once 0.2,
ten times 0.024), a fresh draw every batch, and the ``<unk>`` row is trained
by it. It is a regulariser and hides memorisation: on a generated corpus
with a real-sized vocabulary (8000 utterances) three pins said 10 times,
each in its own model, ranked 4, 1563 and 13 of 10^4 with it and first
without it (``tests/test_word_dropout_hides_memorisation.py``).
With character embeddings the replaced word keeps its own character
features; only its word vector drops.

Reserved tokens the training split never has (:mod:`.vocab`) read ``<unk>``;
:func:`tie_untrained_rows` copies the ``<unk>`` row into their rows after
training, so that ``W[i]`` is what the network reads for token ``i``.
:func:`finish_unk_rows` does both steps in order.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from .vocab import UNK_ID, Vocabulary, training_counts

#: The undefended default: no word dropout (the paper's model has none, canary-extraction-nlu §4.1).
DEFAULT_UNK_ALPHA = 0.0
#: Word dropout as a defence: Kiperwasser & Goldberg (2016), p(w) = alpha / (alpha + #(w)).
WORD_DROPOUT_ALPHA = 0.25
#: Rare words: the types seen at most as often as the type at this quantile of the sorted counts.
RARE_SHARE = 0.1


def check_unk_alpha(value: object) -> None:
    """``ValueError`` naming ``unk_alpha`` unless it is a finite number >= 0."""
    if (not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value)
            or value < 0.0):
        raise ValueError(f"config unk_alpha={value!r} must be a finite number >= 0 (word dropout, a defence: a "
                         "token seen #(w) times in training reads <unk> with probability unk_alpha / (unk_alpha + "
                         f"#(w))); fix: use {WORD_DROPOUT_ALPHA} (Kiperwasser & Goldberg 2016) to train with word "
                         f"dropout, or {DEFAULT_UNK_ALPHA:g} (the default, the paper's undefended model) for none")


def unk_probabilities(vocab: Vocabulary, utterances: Sequence, alpha: float,
                      device: torch.device | str = "cpu") -> torch.Tensor:
    """``[|V|]`` float: ``alpha / (alpha + #(w))`` at the id of each token of ``utterances``, 0 elsewhere."""
    probs = torch.zeros(len(vocab.tokens), dtype=torch.float32)
    counts = training_counts(utterances)
    if alpha > 0.0 and counts:
        tokens = list(counts)
        n = torch.tensor([counts[t] for t in tokens], dtype=torch.float32)
        probs[torch.tensor(vocab.token_ids(tokens, strict=True))] = alpha / (alpha + n)
    return probs.to(device)


def drop_to_unk(ids: torch.Tensor, probabilities: torch.Tensor, uniform: torch.Tensor | None = None) -> torch.Tensor:
    """``ids`` with each occurrence replaced by ``UNK_ID`` with ``probabilities[id]``.

    ``probabilities``: ``[|V|]``, or ``[k, |V|]`` for the ids ``[k, ...]`` of k
    stacked models (row j for model j); ``uniform``: the draws in [0, 1), of
    ``ids``' shape (default: torch's global RNG).
    """
    if uniform is None:
        uniform = torch.rand(ids.shape, device=ids.device)
    if probabilities.dim() == 1:
        chance = probabilities[ids]
    else:
        chance = probabilities.gather(1, ids.flatten(1)).view_as(ids)
    return ids.masked_fill(uniform < chance, UNK_ID)


def rare_words(utterances: Sequence, share: float = RARE_SHARE) -> tuple[str, ...]:
    """Training word types seen at most ``c`` times, ``c`` the count at the ``share`` quantile (sorted).

    On a corpus with hapaxes (any real one) ``c`` is 1 when they are at least
    ``share`` of the types; on one without, the rarest ``share`` or more.
    """
    counts = training_counts(utterances)
    if not counts:
        return ()
    ordered = sorted(counts.values())
    cut = ordered[min(len(ordered) - 1, int(share * len(ordered)))]
    return tuple(sorted(t for t, n in counts.items() if n <= cut))


def rare_word_rows(vocab: Vocabulary, utterances: Sequence, share: float = RARE_SHARE) -> torch.Tensor:
    """Row ids ``[k]`` (long) of :func:`rare_words`, to set ``<unk>`` repeatedly without recounting."""
    return torch.tensor(vocab.token_ids(rare_words(utterances, share), strict=True), dtype=torch.long)


@torch.no_grad()
def set_unk_row(weight: torch.Tensor, rows: torch.Tensor) -> None:
    """Row ``UNK_ID`` of ``weight`` := the mean of ``weight[rows]`` (in place; nothing when ``rows`` is empty)."""
    if rows.numel():
        weight[UNK_ID] = weight[rows.to(weight.device)].mean(dim=0)


def set_unk_row_from_rare_words(weight: torch.Tensor, vocab: Vocabulary, utterances: Sequence,
                                share: float = RARE_SHARE) -> tuple[str, ...]:
    """Set row ``UNK_ID`` of ``weight`` (in place) to the mean of the rows of :func:`rare_words`.

    Call after training with the training split (and, for a validation loss
    that reads ``<unk>`` as the finished model will, before each validation
    pass); returns the words averaged. Nothing is trained: without word
    dropout no training batch reads ``<unk>``, so its row has no gradient and
    the other weights, and what the model memorised, are the same with or
    without this call. Without training tokens the row is left as it is.
    """
    words = rare_words(utterances, share)
    set_unk_row(weight, torch.tensor(vocab.token_ids(words, strict=True), dtype=torch.long))
    return words


@torch.no_grad()
def tie_untrained_rows(weight: torch.Tensor, vocab: Vocabulary) -> None:
    """Copy row ``UNK_ID`` of ``weight`` into the rows of the vocabulary's untrained tokens (in place)."""
    if vocab.untrained:
        rows = torch.tensor(vocab.token_ids(vocab.untrained, strict=True), device=weight.device)
        weight[rows] = weight[UNK_ID].clone()


def finish_unk_rows(weight: torch.Tensor, vocab: Vocabulary, utterances: Sequence, unk_alpha: float) -> None:
    """After training: without word dropout set ``<unk>`` from the rare words (a trained one is kept), then
    tie the untrained reserved tokens' rows to it."""
    if unk_alpha == 0.0:
        set_unk_row_from_rare_words(weight, vocab, utterances)
    tie_untrained_rows(weight, vocab)
