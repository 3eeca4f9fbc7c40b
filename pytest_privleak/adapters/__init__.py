"""Adapters: a loaded transformers model + tokenizer -> the protocols the attacks need (protocols.py).

One call, :func:`from_transformers`, picks the adapter from the model's class:

==========================================  ==========================================
model                                       adapter (protocols)
==========================================  ==========================================
``AutoModelForSequenceClassification``      :class:`.classifier.TransformersClassifier`
``AutoModelForTokenClassification``         (``SoftInputModel``, ``SequenceScorer``)
  (or a pair: ``slot_model=``)
``AutoModelForCausalLM``                    :class:`.language_model.CausalLMScorer` (``SequenceScorer``)
``AutoModelForMaskedLM``                    :class:`.language_model.MaskedLMScorer` (``SequenceScorer``)
``AutoModel`` (no head: ``BertModel``...)   :class:`.encoder.TransformersEncoder` (``Encoder``,
                                            mean pooling; ``normalize=True`` for unit length)
==========================================  ==========================================

Nothing here imports torch or transformers until an adapter is asked for.
"""
from __future__ import annotations

from importlib import import_module
from typing import Any

_LAZY = {
    "classifier_adapter": ".classifier",
    "TransformersClassifier": ".classifier",
    "language_model_adapter": ".language_model",
    "CausalLMScorer": ".language_model",
    "MaskedLMScorer": ".language_model",
    "encoder_adapter": ".encoder",
    "TransformersEncoder": ".encoder",
    "load_minilm": ".encoder",
    "generate_from_prefixes": ".generation",
    "generator_for": ".generation",
    "TokenGenerator": ".generation",
    "cross_entropy64": ".log_probs",
    "log_prob_of": ".log_probs",
}

__all__ = ["from_transformers", *sorted(_LAZY)]


def from_transformers(model: Any, tokenizer: Any, **options: Any) -> Any:
    """The protocol adapter for a loaded transformers ``model`` and its ``tokenizer``.

    Classifiers (sequence, token, or a pair with ``slot_model=``) get a
    :class:`~.classifier.TransformersClassifier`; causal and masked language
    models a sequence scorer (log-perplexity, pseudo-log-likelihood); a base
    model without a head (``AutoModel``) an :class:`~.encoder.TransformersEncoder`.
    ``options`` go to the adapter (``batch_size``, ``slot_model``, ``intent_labels``, ``slot_labels``;
    ``normalize``, ``max_length`` for an encoder; ``base`` for a causal LM: the pretrained model it was
    fine-tuned from, the free reference of the ``base`` membership method).
    """
    from .encoder import encoder_adapter, is_base_model

    if options.get("slot_model") is None and is_base_model(model):
        unknown = sorted(set(options) - {"batch_size", "slot_model", "normalize", "max_length"})
        if unknown:
            raise TypeError(f"{', '.join(unknown)} do not apply to an encoder (a model without a head); "
                            "fix: drop them, or load the model with its task head (AutoModelFor...)")
        return encoder_adapter(model, tokenizer, batch_size=options.get("batch_size"),
                               normalize=options.get("normalize", False), max_length=options.get("max_length"))
    from .language_model import is_causal_lm, is_masked_lm, language_model_adapter

    if options.get("slot_model") is None and (is_causal_lm(model) or is_masked_lm(model)):
        unknown = sorted(set(options) - {"batch_size", "slot_model", "base"})
        if unknown:
            raise TypeError(f"{', '.join(unknown)} do not apply to a language model; fix: drop them")
        return language_model_adapter(model, tokenizer, batch_size=options.get("batch_size"),
                                      base=options.get("base"))
    from .classifier import classifier_adapter

    return classifier_adapter(model, tokenizer, **options)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module 'pytest_privleak.adapters' has no attribute {name!r}")
