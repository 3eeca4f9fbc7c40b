"""transformers causal and masked language models as ``SequenceScorer`` (protocols.py), for exposure.

- Causal LM: the score is the log-perplexity of the utterance in bits,
  ``-sum_t log2 Pr(x_t | x_<t)`` over its pieces, the Secret Sharer's
  measure (quoted as eq. 1 of d-exposure-discriminative §2). When the
  tokenizer adds no beginning-of-sequence token and one is known, it is put
  in front so that the first piece is scored too. Sentences that share a
  prefix (a canary space) are scored with the prefix computed once and its
  key/value cache expanded over batches of candidates
  (``score_with_shared_prefix``, :mod:`.causal_prefix`).
- Masked LM: the pseudo-log-likelihood (Salazar et al., "Masked Language
  Model Scoring", 2020), ``-sum_t log2 Pr(x_t | x_\\t)`` with ``x_t`` masked, one
  copy of the utterance per scored piece; special tokens are never masked.
  All copies of a batch go through the model together, ``batch_size`` rows
  per forward pass.

Utterances are scored as their text (tokens joined by single spaces), so a
multi-piece word is scored piece by piece. Lower means more likely, as the
exposure metric needs. Scores are computed under ``torch.no_grad`` on the
model's device, from the model's logits whatever dtype it was loaded in, each
piece's log-probability to float64 precision (:func:`.causal_prefix.token_logp`:
in float32 a memorised piece's rounds to exactly 0, and tied scores hide
members from the membership attacks, issue 33).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from ..finite import require_finite
from .causal_prefix import logits_but_last, make_plan, shared_prefix_bits, token_logp

LN2 = math.log(2.0)
_FIX_NAN = ("check the model's weights for NaN/inf (a diverged fine-tune), or load it in float32 or bfloat16 "
            "instead of float16")


def _is(model: Any, family: str, suffixes: tuple[str, ...]) -> bool:
    from transformers.models.auto import modeling_auto

    names = getattr(modeling_auto, f"MODEL_FOR_{family}_MAPPING_NAMES", {})
    known = {n for v in names.values() for n in ((v,) if isinstance(v, str) else v)}
    return type(model).__name__ in known or type(model).__name__.endswith(suffixes)


def is_causal_lm(model: Any) -> bool:
    return _is(model, "CAUSAL_LM", ("ForCausalLM", "LMHeadModel"))


def is_masked_lm(model: Any) -> bool:
    return _is(model, "MASKED_LM", ("ForMaskedLM",))


def _texts(utterances: Sequence[Any]) -> list[str]:
    texts = []
    for i, u in enumerate(utterances):
        tokens = getattr(u, "tokens", None)
        if tokens is None:
            raise TypeError(f"utterances[{i}] is {type(u).__name__}, expected an Utterance (or anything with .tokens)")
        texts.append(" ".join(tokens))
    return texts


class _LMScorer:
    """Shared set-up of the two language-model scorers."""

    kind = ""

    def __init__(self, model: Any, tokenizer: Any, *, batch_size: int) -> None:
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"model must be a loaded transformers model (torch.nn.Module), got {type(model).__name__}")
        if not callable(tokenizer) or not hasattr(tokenizer, "convert_ids_to_tokens"):
            raise TypeError(f"tokenizer must be a transformers tokenizer, got {type(tokenizer).__name__}")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be an integer >= 1, got {batch_size!r}")
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        pad = tokenizer.pad_token_id
        self.pad_id = pad if pad is not None else (tokenizer.eos_token_id if tokenizer.eos_token_id is not None else 0)

    @property
    def device(self) -> torch.device:
        return self.model.get_input_embeddings().weight.device

    def describe(self) -> dict[str, Any]:
        return {"adapter": self.kind, "model": type(self.model).__name__, "device": str(self.device),
                "dtype": str(self.model.get_input_embeddings().weight.dtype).replace("torch.", "")}

    def _encode(self, utterances: Sequence[Any]) -> list[list[int]]:
        return [list(r) for r in self.tokenizer(_texts(utterances), add_special_tokens=True)["input_ids"]]

    def _padded(self, rows: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        lengths = torch.tensor([len(r) for r in rows])
        width = int(lengths.max())
        ids = torch.tensor([list(r) + [self.pad_id] * (width - len(r)) for r in rows], dtype=torch.long)
        mask = (torch.arange(width) < lengths.unsqueeze(1)).long()
        return ids.to(self.device), mask.to(self.device)

    def _check(self, values: torch.Tensor) -> torch.Tensor:
        require_finite(values, what=f"the log-probabilities of {type(self.model).__name__} ({self.kind})",
                       fix=_FIX_NAN)
        return values


def bos_id_of(model: Any, tokenizer: Any) -> int | None:
    """The beginning-of-sequence id put in front of a sentence: the tokenizer's, else the model config's."""
    bos = getattr(tokenizer, "bos_token_id", None)
    if bos is None and model is not None:
        bos = getattr(model.config, "bos_token_id", None)
    return bos


class CausalLMScorer(_LMScorer):
    """Log-perplexity in bits of each utterance under a causal LM (lower = more likely).

    :meth:`score_with_shared_prefix` scores a whole space of candidates that
    share a prefix (exposure) with the prefix through the model once
    (:mod:`.causal_prefix`); it returns what :meth:`score` returns for the
    same sentences, within float32 rounding of the logits.
    """

    kind = "transformers-causal-lm"

    def __init__(self, model: Any, tokenizer: Any, *, batch_size: int = 64, base: Any = None) -> None:
        super().__init__(model, tokenizer, batch_size=batch_size)
        #: put in front of utterances that do not start with it, so their first piece is scored
        self.bos_id: int | None = bos_id_of(model, tokenizer)
        self._plans: dict[tuple, Any] = {}
        if base is not None:
            if not isinstance(base, torch.nn.Module) or not is_causal_lm(base):
                raise TypeError(f"base must be the pretrained causal LM the model was fine-tuned from (a loaded "
                                f"AutoModelForCausalLM), got {type(base).__name__}; fix: base=AutoModelForCausalLM."
                                "from_pretrained(the base's name or folder)")
            rows, base_rows = model.get_input_embeddings().weight.shape[0], base.get_input_embeddings().weight.shape[0]
            if rows != base_rows:
                raise ValueError(f"base has {base_rows} vocabulary rows, the model {rows}: the base must read the "
                                 "model's tokenizer as the model does; fix: resize the base's embeddings as the "
                                 "fine-tuning did (base.resize_token_embeddings(len(tokenizer))) before passing it")
        #: the pretrained base, the free reference of the ``base`` membership method (None: unknown)
        self.base = None if base is None else base.eval()

    def _ids(self, texts: list[str]) -> list[list[int]]:
        """Pieces of each text as scored: the tokenizer's (with its special tokens), ``bos`` in front."""
        rows = self.tokenizer(texts, add_special_tokens=True)["input_ids"]
        bos = self.bos_id
        if bos is None:
            return [list(r) for r in rows]
        return [list(r) if r and r[0] == bos else [bos, *r] for r in rows]

    def _rows(self, utterances: Sequence[Any]) -> list[list[int]]:
        rows = self._ids(_texts(utterances))
        for i, r in enumerate(rows):
            if len(r) < 2:
                raise ValueError(f"utterances[{i}] has no piece to score after the first one (the model has no "
                                 "beginning-of-sequence token to condition on); fix: set tokenizer.bos_token")
        return rows

    def _bits(self, ids: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """``-sum_t log2 Pr(x_t | x_<t)`` of rows ``ids`` (``mask``: None when no row is padded)."""
        # use_cache=False: one scoring pass needs no key/value cache for later generation;
        # no attention mask when nothing is padded, so the model takes its plain causal path
        logits = logits_but_last(self.model, ids, attention_mask=mask, use_cache=False)
        logp = self._check(token_logp(logits, ids[:, 1:]))
        if mask is not None:
            logp = logp.masked_fill(mask[:, 1:] == 0, 0.0)
        return -logp.sum(dim=1) / LN2

    @torch.no_grad()
    def score(self, utterances: Sequence[Any]) -> np.ndarray:
        """``-sum_t log2 Pr(x_t | x_<t)`` per utterance, float64 ``[N]``."""
        return self._score_rows(self._rows(utterances))

    def _score_rows(self, rows: list[list[int]]) -> np.ndarray:
        out = np.empty(len(rows), dtype=np.float64)
        lengths = np.array([len(r) for r in rows])
        order = np.argsort(lengths, kind="stable")
        for start in range(0, len(order), self.batch_size):
            chunk = order[start:start + self.batch_size]
            if lengths[chunk[0]] == lengths[chunk[-1]]:      # one length (sorted): no padding, no mask
                ids = torch.tensor([rows[i] for i in chunk], dtype=torch.long, device=self.device)
                bits = self._bits(ids, None)
            else:
                bits = self._bits(*self._padded([rows[i] for i in chunk]))
            out[chunk] = bits.double().cpu().numpy()
        return out

    @torch.no_grad()
    def token_log_probs(self, utterances: Sequence[Any]) -> list[np.ndarray]:
        """``log Pr(x_t | x_<t)`` (nats) of every scored piece of each utterance, float64 rows.

        The per-token view of :meth:`score` (each row sums to ``-score * ln 2``), for Min-K% Prob
        (:mod:`pytest_privleak.attacks.membership.reference_free`).
        """
        return [logp for logp, _ in self.token_predictions(utterances)]

    @torch.no_grad()
    def token_predictions(self, utterances: Sequence[Any]) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per utterance, ``(log Pr(x_t | x_<t) [T], hit [T])``: each scored piece's log-probability (nats,
        float64) and whether it is the model's most likely next piece there (the error positions of
        :mod:`pytest_privleak.attacks.membership.base_reference` are where it is not)."""
        rows = self._rows(utterances)
        out: list[tuple[np.ndarray, np.ndarray]] = []
        for start in range(0, len(rows), self.batch_size):
            chunk = rows[start:start + self.batch_size]
            ids, mask = self._padded(chunk)
            logits = logits_but_last(self.model, ids, attention_mask=mask, use_cache=False)
            logp = self._check(token_logp(logits, ids[:, 1:])).double().cpu().numpy()
            hit = (logits.argmax(dim=-1) == ids[:, 1:]).cpu().numpy()
            out += [(logp[i, :len(r) - 1], hit[i, :len(r) - 1]) for i, r in enumerate(chunk)]
        return out

    def base_reference(self) -> "CausalLMScorer | None":
        """The pretrained base this model was fine-tuned from, as a scorer over the same tokenizer (``base=`` of
        :func:`language_model_adapter`), or None: the free reference of the ``base`` membership method."""
        if self.base is None:
            return None
        return CausalLMScorer(self.base, self.tokenizer, batch_size=self.batch_size)

    def unknown_words(self, words: Sequence[str]) -> list[str]:
        """The ``words`` (distinct, in order) that the tokenizer spells with its unknown token, or with nothing."""
        words = list(dict.fromkeys(words))
        if not words:
            return []
        unk = self.tokenizer.unk_token_id
        rows = self.tokenizer(words, add_special_tokens=False)["input_ids"]
        return [w for w, r in zip(words, rows) if not r or (unk is not None and unk in r)]

    @torch.no_grad()
    def score_with_shared_prefix(self, prefix: Sequence[str], vocabulary: Sequence[str], choices) -> np.ndarray:
        """``score`` of the sentences ``prefix + [vocabulary[c] for c in row]``, one per row of ``choices [B, n]``.

        The prefix goes through the model once and its key/value cache is
        expanded over batches of candidates (:func:`.causal_prefix.shared_prefix_bits`);
        when the tokenizer's pieces of a word depend on more than the prefix
        before it, the sentences are scored the plain way. Words the tokenizer
        reads as unknown are refused (every candidate with one would score as
        the same other sentence).
        """
        prefix, vocabulary = tuple(prefix), tuple(vocabulary)
        choices = torch.as_tensor(np.asarray(choices), dtype=torch.long)
        if choices.dim() != 2 or choices.shape[1] < 1:
            raise ValueError(f"choices must be [B, n] indices into vocabulary, got shape {list(choices.shape)}; "
                             "fix: one row of word indices per candidate")
        if len(vocabulary) < 1 or (choices.numel() and not 0 <= int(choices.min()) <= int(choices.max())
                                   < len(vocabulary)):
            raise ValueError(f"choices hold indices outside vocabulary (|vocabulary| = {len(vocabulary)}); fix: "
                             f"indices in 0 .. {len(vocabulary) - 1}")
        unknown = self.unknown_words((*prefix, *vocabulary))
        if unknown:
            raise ValueError(f"{len(unknown)} word(s) of the prefix or vocabulary become the unknown token "
                             f"{self.tokenizer.unk_token!r} of {type(self.tokenizer).__name__} (e.g. {unknown[:5]}), "
                             "so their sentences would score as other sentences; fix: use words the tokenizer "
                             "spells, or add them to its vocabulary before training")
        if choices.shape[0] == 0:
            return np.empty(0, dtype=np.float64)
        key = (prefix, vocabulary, choices.shape[1])
        if key not in self._plans:
            if len(self._plans) > 16:
                self._plans.clear()
            self._plans[key] = make_plan(self._ids, prefix, vocabulary, choices.shape[1])
        plan = self._plans[key]
        if plan is None:
            texts = [" ".join((*prefix, *(vocabulary[i] for i in row))) for row in choices.tolist()]
            return self._score_rows(self._ids(texts))
        return shared_prefix_bits(self.model, plan, choices, self._check).cpu().numpy()


class MaskedLMScorer(_LMScorer):
    """Negative pseudo-log-likelihood in bits of each utterance under a masked LM (lower = more likely)."""

    kind = "transformers-masked-lm"

    def __init__(self, model: Any, tokenizer: Any, *, batch_size: int = 256) -> None:
        super().__init__(model, tokenizer, batch_size=batch_size)
        if tokenizer.mask_token_id is None:
            raise ValueError(f"tokenizer {type(tokenizer).__name__} has no mask token, so pseudo-log-likelihood "
                             "cannot mask pieces; fix: pass the masked LM's own tokenizer")
        self.mask_id: int = tokenizer.mask_token_id
        self._special = torch.tensor(sorted(set(tokenizer.all_special_ids)), dtype=torch.long)

    def token_predictions(self, utterances: Sequence[Any]) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per utterance, each scored piece's log-probability with it masked (nats, float64) and whether it is the
        model's most likely piece there (the error positions of the ``base`` membership method)."""
        return masked_token_predictions(self, utterances)

    @torch.no_grad()
    def score(self, utterances: Sequence[Any]) -> np.ndarray:
        """``-sum_t log2 Pr(x_t | x_\\t)`` per utterance (each piece masked in its own copy), float64 ``[N]``."""
        rows = self._encode(utterances)
        ids, mask = self._padded(rows)
        scored = (mask == 1) & ~torch.isin(ids, self._special.to(ids.device))
        utt, pos = scored.nonzero(as_tuple=True)              # one masked copy per scored piece
        totals = torch.zeros(len(rows), dtype=torch.float64, device=ids.device)
        for start in range(0, utt.shape[0], self.batch_size):
            u, p = utt[start:start + self.batch_size], pos[start:start + self.batch_size]
            copies = ids[u].clone()
            truth = copies[torch.arange(u.shape[0], device=ids.device), p]
            copies[torch.arange(u.shape[0], device=ids.device), p] = self.mask_id
            logits = self.model(input_ids=copies, attention_mask=mask[u]).logits
            at = logits[torch.arange(u.shape[0], device=ids.device), p]
            logp = self._check(token_logp(at, truth))
            totals.index_add_(0, u, -logp)
        return (totals / LN2).cpu().numpy()


def masked_token_predictions(scorer: MaskedLMScorer, utterances: Sequence[Any]) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per utterance, ``(log Pr(x_t | x_\\t) [T], hit [T])`` of each scored piece (masked in its own copy, as
    :meth:`MaskedLMScorer.score` reads it) and whether it is the model's most likely piece there."""
    rows = scorer._encode(utterances)
    ids, mask = scorer._padded(rows)
    scored = (mask == 1) & ~torch.isin(ids, scorer._special.to(ids.device))
    utt, pos = scored.nonzero(as_tuple=True)
    logp = torch.empty(utt.shape[0], dtype=torch.float64)
    hit = torch.empty(utt.shape[0], dtype=torch.bool)
    with torch.no_grad():
        for start in range(0, utt.shape[0], scorer.batch_size):
            u, p = utt[start:start + scorer.batch_size], pos[start:start + scorer.batch_size]
            arange = torch.arange(u.shape[0], device=ids.device)
            copies = ids[u].clone()
            truth = copies[arange, p]
            copies[arange, p] = scorer.mask_id
            at = scorer.model(input_ids=copies, attention_mask=mask[u]).logits[arange, p]
            logp[start:start + u.shape[0]] = scorer._check(token_logp(at, truth)).cpu()
            hit[start:start + u.shape[0]] = (at.argmax(dim=-1) == truth).cpu()
    counts = scored.sum(dim=1).cpu().tolist()
    bounds = np.cumsum([0] + counts)
    return [(logp[a:b].numpy(), hit[a:b].numpy()) for a, b in zip(bounds[:-1], bounds[1:])]


def language_model_adapter(model: Any, tokenizer: Any, *, batch_size: int | None = None,
                           base: Any = None) -> CausalLMScorer | MaskedLMScorer:
    """A ``SequenceScorer`` for a loaded ``AutoModelForCausalLM`` or ``AutoModelForMaskedLM``.

    ``batch_size``: utterances (causal) or masked copies (masked) per forward pass. ``base``: the pretrained
    causal LM the model was fine-tuned from (same tokenizer), which the ``base`` membership method compares
    it with at no training cost (after EZ-MIA, Ilić et al. 2026).
    """
    if is_masked_lm(model):
        if base is not None:
            raise TypeError("base= is read by the causal-LM adapter only (the base membership method compares next-"
                            "piece predictions); fix: drop it for a masked LM")
        return MaskedLMScorer(model, tokenizer, **({} if batch_size is None else {"batch_size": batch_size}))
    if is_causal_lm(model):
        return CausalLMScorer(model, tokenizer, base=base,
                              **({} if batch_size is None else {"batch_size": batch_size}))
    raise TypeError(f"{type(model).__name__} is neither a causal nor a masked language model; fix: load it with "
                    "AutoModelForCausalLM or AutoModelForMaskedLM (a classifier goes to classifier_adapter)")
