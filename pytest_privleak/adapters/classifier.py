"""transformers sequence / token classifiers as ``SoftInputModel`` and ``SequenceScorer`` (protocols.py).

One call, :func:`classifier_adapter`, adapts

- an ``AutoModelForSequenceClassification`` (the loss is the intent
  cross-entropy; tags are ignored),
- an ``AutoModelForTokenClassification`` (the loss is the mean tag
  cross-entropy over the utterance's words; the intent is ignored),
- a pair of them (``slot_model=``) for joint intent + slots: loss = intent
  cross-entropy + mean tag cross-entropy, the form of the joint training loss
  of canary-extraction-nlu §4.1 with a softmax tag head in place of the CRF,
- or one custom model with both heads, whose forward takes ``inputs_embeds``
  and ``attention_mask`` and returns ``(intent_logits, slot_logits)`` or an
  object with those two attributes (``intent_labels``/``slot_labels`` name
  their classes).

The canary attacks (canary-extraction-nlu §3.1) feed a soft embedding per
token, so a token is an attackable row only when the tokenizer encodes it as
exactly one word piece: :attr:`TransformersClassifier.vocabulary` lists those
words (continuation pieces, special tokens and pieces the normaliser changes
are left out) and :meth:`TransformersClassifier.explain_missing` says why a
token is not there. :meth:`loss_from_embeddings` receives the utterance's word
embeddings ``[B, L, d]`` and adds the special tokens' embeddings around them
(``[CLS] .. [SEP]`` for BERT); the model adds its own position and type
embeddings, as it does for ``input_ids``. A pair of models with their own
embedding tables is read as one table, the two side by side (``d = d1 + d2``):
a soft input ``a W`` is then the same mixture for both models.

Per-utterance tag loss: the labelled pieces are the first piece of each word
(the usual word-piece alignment); their cross-entropy is averaged, the
per-example form of the model's own token-classification loss.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from ..finite import require_finite
from ._pieces import WordPieces
from .log_probs import cross_entropy64

IGNORE = -100
_FIX_NAN = ("check the model's weights and inputs for NaN/inf (e.g. a diverged fine-tune, or fp16 overflow: "
            "load it in float32 or bfloat16)")


def _label_map(labels: Any, what: str) -> dict[str, int]:
    if isinstance(labels, Mapping):
        out = {str(k): int(v) for k, v in labels.items()}
    elif isinstance(labels, Sequence) and not isinstance(labels, str):
        out = {str(k): i for i, k in enumerate(labels)}
    else:
        raise TypeError(f"{what} must be a label2id mapping or a sequence of label names, got {type(labels).__name__}")
    if not out:
        raise ValueError(f"{what} is empty; fix: give the model's class names (config.label2id)")
    return out


def _default_labels(labels: Mapping[str, int], what: str, model: Any) -> None:
    if labels and all(k == f"LABEL_{v}" for k, v in labels.items()):
        raise ValueError(
            f"{what}: {type(model).__name__}.config.label2id holds only the default names LABEL_0.. , so the "
            "utterances' intent or tag names cannot be mapped to classes; fix: set config.label2id/id2label when "
            "fine-tuning, or pass the names in class order (intent_labels=[...] / slot_labels=[...])")


def _is(model: Any, family: str) -> bool:
    from transformers.models.auto import modeling_auto

    names = getattr(modeling_auto, f"MODEL_FOR_{family}_MAPPING_NAMES", {})
    known = {n for v in names.values() for n in ((v,) if isinstance(v, str) else v)}
    suffix = {"SEQUENCE_CLASSIFICATION": "ForSequenceClassification",
              "TOKEN_CLASSIFICATION": "ForTokenClassification"}[family]
    return type(model).__name__ in known or type(model).__name__.endswith(suffix)


class TransformersClassifier:
    """A fine-tuned transformers classifier (or pair) as a ``SoftInputModel`` and a ``SequenceScorer``.

    Built by :func:`classifier_adapter`. The models are put in evaluation mode
    (dropout off: the attacks need a deterministic loss); weights are not
    changed. Losses are float64 from the model's logits, whatever dtype the
    model was loaded in, and exact near 0 (:func:`.log_probs.cross_entropy64`):
    ``F.cross_entropy`` in float32 rounds the loss of a record whose true class
    leads by about 17 logits to exactly 0, and such ties hide members from the
    membership attacks (issue 33).
    """

    def __init__(self, model: Any, tokenizer: Any, *, slot_model: Any = None, intent_labels: Any = None,
                 slot_labels: Any = None, batch_size: int = 256) -> None:
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"model must be a loaded transformers model (torch.nn.Module), got {type(model).__name__}")
        if slot_model is not None and not isinstance(slot_model, torch.nn.Module):
            raise TypeError(f"slot_model must be a transformers token classifier, got {type(slot_model).__name__}")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be an integer >= 1, got {batch_size!r}")
        self.batch_size = batch_size
        self.pieces = WordPieces(tokenizer)
        self.tokenizer = tokenizer
        self.mode, self.models = self._modes(model, slot_model)
        self.intent_labels: dict[str, int] | None = None
        self.slot_labels: dict[str, int] | None = None
        if self.mode == "joint" and (intent_labels is None or slot_labels is None):
            raise ValueError(f"{type(model).__name__} is read as one model with both heads, which needs "
                             "intent_labels= and slot_labels= (class names in order, or label2id mappings); fix: "
                             "pass both, or pass an AutoModelForSequenceClassification / TokenClassification")
        if self.mode in ("intent", "pair", "joint"):
            owner = model
            self.intent_labels = (_label_map(intent_labels, "intent_labels") if intent_labels is not None
                                  else dict(owner.config.label2id))
            if intent_labels is None:
                _default_labels(self.intent_labels, "intent labels", owner)
        if self.mode in ("slots", "pair", "joint"):
            owner = slot_model if self.mode == "pair" else model
            self.slot_labels = (_label_map(slot_labels, "slot_labels") if slot_labels is not None
                                else dict(owner.config.label2id))
            if slot_labels is None:
                _default_labels(self.slot_labels, "slot labels", owner)
        for m in self.models:
            m.eval()
        tables = [m.get_input_embeddings().weight for m in self.models]
        shared = len(tables) == 2 and tables[0] is tables[1]
        #: the embedding tables read as one (side by side), and which of them each model reads
        self._tables = tables[:1] if shared else tables
        self._table_of = [0, 0] if shared else list(range(len(tables)))
        self._widths = [t.shape[1] for t in tables]
        self.vocabulary: tuple[str, ...] = self.pieces.single_piece_words[0]
        self._rows = torch.tensor(self.pieces.single_piece_words[1], dtype=torch.long)
        self._check_inputs_embeds()

    # -- construction -----------------------------------------------------------------
    @staticmethod
    def _modes(model: Any, slot_model: Any) -> tuple[str, list[Any]]:
        if slot_model is not None:
            if not _is(model, "SEQUENCE_CLASSIFICATION") or not _is(slot_model, "TOKEN_CLASSIFICATION"):
                raise TypeError(f"a pair is (sequence classifier, token classifier), got ({type(model).__name__}, "
                                f"{type(slot_model).__name__}); fix: classifier_adapter(intent_model, tokenizer, "
                                "slot_model=tagger)")
            return "pair", [model, slot_model]
        if _is(model, "SEQUENCE_CLASSIFICATION"):
            return "intent", [model]
        if _is(model, "TOKEN_CLASSIFICATION"):
            return "slots", [model]
        if not hasattr(model, "get_input_embeddings"):
            raise TypeError(f"{type(model).__name__} is neither a sequence nor a token classifier and has no "
                            "get_input_embeddings(); fix: pass an AutoModelForSequenceClassification / "
                            "AutoModelForTokenClassification, or a joint model returning (intent_logits, slot_logits)")
        return "joint", [model]

    def _check_inputs_embeds(self) -> None:
        """Refuse a model whose ``inputs_embeds`` path differs from its ``input_ids`` path (one utterance)."""
        word = self.vocabulary[0] if self.vocabulary else None
        if word is None:
            raise ValueError("the tokenizer has no word that is a single piece; the canary attacks cannot run on it")
        ids = torch.tensor([self.pieces.lead + [int(self._rows[0])] + self.pieces.tail])
        for m in self.models:
            device = m.get_input_embeddings().weight.device
            with torch.no_grad():
                by_ids = self._logits(m, m(input_ids=ids.to(device), attention_mask=torch.ones_like(ids).to(device)))
                embeds = m.get_input_embeddings()(ids.to(device))
                by_embeds = self._logits(m, m(inputs_embeds=embeds, attention_mask=torch.ones_like(ids).to(device)))
            require_finite(torch.cat([x.detach().float().reshape(-1) for x in by_ids]),
                           what=f"the logits of {type(m).__name__} on a one-word utterance", fix=_FIX_NAN)
            for a, b in zip(by_ids, by_embeds):
                if not torch.allclose(a.float(), b.float(), rtol=1e-3, atol=1e-3 * float(a.float().abs().max()) + 1e-6):
                    raise ValueError(
                        f"{type(m).__name__} gives different outputs for input_ids and for inputs_embeds = its own "
                        "embedding rows (it scales or transforms input_ids inside), so the canary attacks would "
                        "attack another function; fix: adapt this model by hand (pytest_privleak.protocols)")

    def _logits(self, model: Any, out: Any) -> tuple[torch.Tensor, ...]:
        if self.mode == "joint":
            if isinstance(out, (tuple, list)) and len(out) >= 2:
                return out[0], out[1]
            if hasattr(out, "intent_logits") and hasattr(out, "slot_logits"):
                return out.intent_logits, out.slot_logits
            raise TypeError(f"{type(model).__name__} must return (intent_logits, slot_logits) or an object with "
                            f"those attributes, got {type(out).__name__}")
        return (out.logits,)

    # -- facts ----------------------------------------------------------------------------
    @property
    def device(self) -> torch.device:
        return self._tables[0].device

    @staticmethod
    def _device_of(model: Any) -> torch.device:
        return model.get_input_embeddings().weight.device

    def describe(self) -> dict[str, Any]:
        """JSON-safe facts for the report."""
        return {"adapter": "transformers-classifier", "mode": self.mode,
                "models": [type(m).__name__ for m in self.models],
                "dtype": str(self._tables[0].dtype).replace("torch.", ""), "device": str(self.device),
                "vocabulary": len(self.vocabulary)}

    def explain_missing(self, token: str) -> str:
        """Why ``token`` is not in :attr:`vocabulary`, and the fix (word pieces, unknown, normalised)."""
        return self.pieces.explain(token)

    def require_single_pieces(self, tokens: Sequence[str], *, role: str = "canary tokens") -> None:
        """Raise ``OutOfVocabularyError`` naming every token of ``tokens`` that is not a single piece, and why."""
        from ..protocols import OutOfVocabularyError

        known = set(self.vocabulary)
        missing = [t for t in dict.fromkeys(tokens) if t not in known]
        if missing:
            raise OutOfVocabularyError(f"{role}: " + "; ".join(self.explain_missing(t) for t in missing))

    # -- labels -------------------------------------------------------------------------------
    def _intent_ids(self, intents: Sequence[str] | str, batch: int) -> torch.Tensor:
        if isinstance(intents, str):
            intents = [intents] * batch
        if len(intents) != batch:
            raise ValueError(f"got {len(intents)} intents for a batch of {batch}; give one per row")
        out = []
        for i, name in enumerate(intents):
            if name not in self.intent_labels:
                raise ValueError(f"intent {name!r} (row {i}) is not a class of the model "
                                 f"({sorted(self.intent_labels)}); fix: use the model's intent names (config.label2id)")
            out.append(self.intent_labels[name])
        return torch.tensor(out, dtype=torch.long)

    def _tag_ids(self, tags: Sequence[str], row: int) -> list[int]:
        out = []
        for tag in tags:
            if tag not in self.slot_labels:
                raise ValueError(f"tag {tag!r} (row {row}) is not a class of the token classifier "
                                 f"({sorted(self.slot_labels)}); fix: use the model's tag names (config.label2id)")
            out.append(self.slot_labels[tag])
        return out

    # -- the loss -------------------------------------------------------------------------------
    def _row_losses(self, outputs: list[tuple[torch.Tensor, ...]], intent_ids: torch.Tensor | None,
                    slot_targets: torch.Tensor | None) -> torch.Tensor:
        """Per-row loss ``[B]`` (float64) from each model's logits: intent CE + mean tag CE over labelled pieces."""
        intent_logits = slot_logits = None
        if self.mode == "intent":
            (intent_logits,) = outputs[0]
        elif self.mode == "slots":
            (slot_logits,) = outputs[0]
        elif self.mode == "pair":
            (intent_logits,), (slot_logits,) = outputs
        else:
            intent_logits, slot_logits = outputs[0]
        total = None
        if intent_logits is not None:
            total = cross_entropy64(intent_logits, intent_ids.to(intent_logits.device))
        if slot_logits is not None:
            targets = slot_targets.to(slot_logits.device)
            ce = cross_entropy64(slot_logits, targets, ignore_index=IGNORE)
            labelled = (targets != IGNORE).sum(dim=1).clamp_min(1)
            slots = ce.sum(dim=1) / labelled
            total = slots if total is None else total + slots
        return total

    # -- SoftInputModel ------------------------------------------------------------------------
    def input_embeddings(self) -> torch.Tensor:
        """``[|V|, d]`` word-piece embeddings of :attr:`vocabulary` (two models: side by side)."""
        with torch.no_grad():
            return torch.cat([t.detach()[self._rows.to(t.device)] for t in self._tables], dim=-1)

    def loss_from_embeddings(self, embeddings: torch.Tensor, intents: Sequence[str] | str,
                             tags: Sequence[Sequence[str]] | Sequence[str]) -> torch.Tensor:
        """Per-row training loss ``[B]`` of word embeddings ``[B, L, d]`` with known labels (§3.1, eq. 3).

        The special tokens' embeddings are added around the rows; differentiable
        with respect to ``embeddings``.
        """
        width = sum(self._widths)
        if not isinstance(embeddings, torch.Tensor) or embeddings.dim() != 3 or embeddings.shape[-1] != width:
            shape = list(embeddings.shape) if isinstance(embeddings, torch.Tensor) else type(embeddings).__name__
            raise ValueError(f"embeddings must be a [B, L, {width}] tensor, got {shape}")
        batch, length, _ = embeddings.shape
        intent_ids = self._intent_ids(intents, batch) if self.intent_labels is not None else None
        slot_targets = None
        if self.slot_labels is not None:
            if len(tags) and isinstance(tags[0], str):
                tags = [tags] * batch
            if len(tags) != batch:
                raise ValueError(f"got {len(tags)} tag rows for a batch of {batch}; give one per row")
            for row, t in enumerate(tags):
                if len(t) != length:
                    raise ValueError(f"tags[{row}] has {len(t)} tags for rows of {length} tokens")
            lead, tail = len(self.pieces.lead), len(self.pieces.tail)
            body = torch.tensor([self._tag_ids(t, r) for r, t in enumerate(tags)], dtype=torch.long)
            slot_targets = torch.cat([torch.full((batch, lead), IGNORE), body.reshape(batch, length),
                                      torch.full((batch, tail), IGNORE)], dim=1)
        parts = embeddings.split(self._widths, dim=-1) if len(self._widths) > 1 else (embeddings,)
        framed = []
        for table, part in zip(self._tables, parts):
            lead = table[self.pieces.lead].detach().unsqueeze(0).expand(batch, -1, -1)
            tail = table[self.pieces.tail].detach().unsqueeze(0).expand(batch, -1, -1)
            framed.append(torch.cat([lead.to(part.dtype), part, tail.to(part.dtype)], dim=1))
        mask = torch.ones(framed[0].shape[:2], dtype=torch.long, device=embeddings.device)
        outputs = [self._logits(m, m(inputs_embeds=framed[k], attention_mask=mask))
                   for m, k in zip(self.models, self._table_of)]
        losses = self._row_losses(outputs, intent_ids, slot_targets)
        if not torch.is_grad_enabled():
            # scoring (the attacks' discrete losses): checked here; inside a gradient loop the check would
            # synchronise every step, and the attack's final no-grad scoring of its guesses catches it
            require_finite(losses, what=f"the training loss of {type(self.models[0]).__name__} on embeddings",
                           fix=_FIX_NAN)
        return losses

    # -- SequenceScorer -------------------------------------------------------------------------
    def _id_batch(self, encoded: Any, chunk: np.ndarray, intent_ids: torch.Tensor | None,
                  tag_ids: list[list[int]] | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None,
                                                            torch.Tensor | None]:
        """Padded ``[CLS] pieces [SEP]`` ids, attention mask and targets of the rows ``chunk`` (one tensor each)."""
        lead, tail, pad = self.pieces.lead, self.pieces.tail, self.pieces.pad_id
        rows = [lead + encoded.ids[i] + tail for i in chunk]
        lengths = torch.tensor([len(r) for r in rows])
        width = int(lengths.max())
        ids = torch.tensor([r + [pad] * (width - len(r)) for r in rows], dtype=torch.long)
        mask = (torch.arange(width) < lengths.unsqueeze(1)).long()
        slot_targets = None
        if tag_ids is not None:
            row_of = [k for k, i in enumerate(chunk) for _ in encoded.first[i]]
            where = [p + len(lead) for i in chunk for p in encoded.first[i]]
            slot_targets = torch.full((len(rows), width), IGNORE, dtype=torch.long)
            slot_targets[row_of, where] = torch.tensor([t for i in chunk for t in tag_ids[i]], dtype=torch.long)
        chosen = None if intent_ids is None else intent_ids[torch.as_tensor(chunk)]
        return ids, mask, chosen, slot_targets

    @torch.no_grad()
    def score(self, utterances: Sequence[Any]) -> np.ndarray:
        """Training loss of each utterance (lower = more likely), batched by piece length; float64 ``[N]``.

        The utterances are encoded once (word pieces looked up, see ``_pieces``), sorted by length so
        that a batch pads little, and each batch is built as whole tensors.
        """
        from ..data.types import Utterance

        for i, u in enumerate(utterances):
            if not isinstance(u, Utterance):
                raise TypeError(f"utterances[{i}] is {type(u).__name__}, expected an Utterance (tokens, tags, intent)")
        out = np.empty(len(utterances), dtype=np.float64)
        if not len(utterances):
            return out
        encoded = self.pieces.encode([u.tokens for u in utterances])
        intent_ids = (self._intent_ids([u.intent for u in utterances], len(utterances))
                      if self.intent_labels is not None else None)
        tag_ids = ([self._tag_ids(u.tags, i) for i, u in enumerate(utterances)]
                   if self.slot_labels is not None else None)
        order = np.argsort([len(ids) for ids in encoded.ids], kind="stable")
        for start in range(0, len(order), self.batch_size):
            chunk = order[start:start + self.batch_size]
            ids, mask, chosen, slot_targets = self._id_batch(encoded, chunk, intent_ids, tag_ids)
            outputs = [self._logits(m, m(input_ids=ids.to(self._device_of(m)), attention_mask=mask.to(self._device_of(m))))
                       for m in self.models]
            losses = self._row_losses(outputs, chosen, slot_targets)
            require_finite(losses, what=f"the training loss of {type(self.models[0]).__name__} on utterances",
                           fix=_FIX_NAN)
            out[chunk] = losses.double().cpu().numpy()
        return out


def classifier_adapter(model: Any, tokenizer: Any, *, slot_model: Any = None, intent_labels: Any = None,
                       slot_labels: Any = None, batch_size: int = 256) -> TransformersClassifier:
    """Adapt a loaded transformers classifier (or intent + slot pair) to the attacks' protocols.

    ``model``: an ``AutoModelForSequenceClassification`` (intent), an
    ``AutoModelForTokenClassification`` (slots) or a joint model with both
    heads; ``slot_model``: the token classifier paired with an intent model.
    Class names come from ``config.label2id`` unless ``intent_labels`` /
    ``slot_labels`` give them (a mapping or the names in class order).
    ``batch_size``: utterances per forward pass in :meth:`~TransformersClassifier.score`.
    """
    return TransformersClassifier(model, tokenizer, slot_model=slot_model, intent_labels=intent_labels,
                                  slot_labels=slot_labels, batch_size=batch_size)
