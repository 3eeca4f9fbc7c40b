"""Remedies chosen by the family of the model that was attacked (issue 24 item 4).

A leak's message ends with what to do about it, and what a team can do
depends on what it trains. The defences of canary-extraction-nlu §6 (dropout,
early stopping, character embeddings concatenated to the word embeddings) are
knobs of a word-level recurrent model; a transformer fine-tuned on word pieces
has no word embeddings to add characters to, and is fine-tuned rather than
trained. So every remedy here is one attack's finding followed by the steps
that fit the model's family:

* ``"transformer"``: a ``transformer-classifier`` / ``tiny-bert`` target, a
  ``from_transformers`` adapter, a Mix And Match model, or any model holding a
  ``transformers`` module or torch attention layer: keep the secrets out of the
  fine-tuning data and de-duplicate them, fine-tune fewer epochs with early
  stopping, fine-tune with DP-SGD (mix-and-match §6.4 names differential
  privacy as the defence).
* ``"recurrent"``: the BiLSTM targets (``joint-bilstm-crf``, ``ner-bilstm-crf``,
  ``lstm-lm``) or a model holding an LSTM, GRU or RNN: the same data steps,
  dropout and early stopping (for a built-in target its ``dropout=`` and
  ``early_stopping=``; a team's own model is not told about options it does
  not have), DP-SGD; for CEA also §6's character embeddings.
* ``"unknown"``: every other model: the steps that hold for any trained model.

Sentence encoders (embedding inversion, keyword inference) are not covered:
their remedies are about the embeddings a team shares and the §VII defences
that wrap any encoder, whatever its family.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

TRANSFORMER, RECURRENT, UNKNOWN = "transformer", "recurrent", "unknown"
FAMILIES = (TRANSFORMER, RECURRENT, UNKNOWN)

#: Built-in target kinds (``describe()["kind"]``) by family.
KIND_FAMILIES = {"transformer-classifier": TRANSFORMER, "tiny-bert": TRANSFORMER,
                 "joint-bilstm-crf": RECURRENT, "ner-bilstm-crf": RECURRENT, "lstm-lm": RECURRENT}
#: Classes whose name says the family: the adapters of :mod:`pytest_privleak.adapters` and the attack views.
_TRANSFORMER_CLASSES = ("Transformers", "TransformerClassifierTarget", "TinyBert", "MixAndMatchModel",
                        "CausalLMScorer", "MaskedLMScorer")
_RECURRENT_LAYERS = (torch.nn.LSTM, torch.nn.GRU, torch.nn.RNN)
_ATTENTION_LAYERS = (torch.nn.MultiheadAttention, torch.nn.TransformerEncoderLayer, torch.nn.TransformerDecoderLayer)

DP = "DP-SGD (Opacus, in the dp extra: pip install 'pytest-privleak[dp]')"
#: The training steps of each family, after the data step.
STEPS = {
    TRANSFORMER: ["fine-tune fewer epochs with early stopping on a validation split{built_in}",
                  f"or fine-tune with {DP}"],
    RECURRENT: ["train with dropout (e.g. 0.2) and early stopping on a validation split{built_in}",
                f"or train with {DP}"],
    UNKNOWN: ["train fewer epochs or with early stopping on a validation split, and with dropout or weight decay",
              f"or train with {DP}"],
}
#: How a built-in target of each family takes the step (its options); a team's own model is not told them.
BUILT_IN_OPTIONS = {
    TRANSFORMER: " (the built-in transformer-classifier stops early unless given early_stopping=False)",
    RECURRENT: " (the built-in targets' dropout= and early_stopping=, with epochs above patience)",
    UNKNOWN: "",
}

_SECRETS = "keep such secrets out of the {data} data (scrub or mask them) and de-duplicate repeated ones"
#: Each attack's finding (what the figure says the model did) and its data step (``{data}``: training or
#: fine-tuning, by family).
FINDINGS = {
    "exposure": ("the model has memorised this secret", _SECRETS),
    "d-exposure": ("the tagger labels the inserted ambiguous phrase with more confidence than the class's own "
                   "words (it has memorised that phrase)", "remove repeated sentences from the {data} data"),
    "membership": ("the model's loss tells its training utterances from unseen ones (it memorised them)",
                   "de-duplicate the {data} data"),
    "mix-and-match": ("the classifier's loss tells the canary's secret token from the rest of the vocabulary "
                      "(it memorised the sentence; mix-and-match §6.4 names differential privacy as the defence)",
                      _SECRETS),
}

#: CEA keeps its own texts: §6's three defences, measured together in the paper (Table 3).
CEA_RECURRENT = ("train with the defences of canary-extraction-nlu §6: dropout 0.2, early stopping on the validation "
                 "loss (patience 20 epochs) and character embeddings concatenated to the word embeddings; combined, "
                 "all three brought HDT to the random baseline in the paper (Table 3). Better still, keep secrets "
                 "such as this one out of the training data, or de-duplicate them")
CEA_TRANSFORMER = ("keep secrets such as this one out of the fine-tuning data (scrub or mask them, de-duplicate "
                   f"them), fine-tune fewer epochs with early stopping on a validation split, raise dropout, or "
                   f"fine-tune with {DP}")


def _by_name(model: Any) -> str | None:
    describe = getattr(type(model), "describe", None)
    facts = describe(model) if callable(describe) else None
    if isinstance(facts, dict):
        if facts.get("kind") in KIND_FAMILIES:
            return KIND_FAMILIES[facts["kind"]]
        if str(facts.get("adapter", "")).startswith("transformers"):
            return TRANSFORMER
    if type(model).__name__.startswith(_TRANSFORMER_CLASSES):
        return TRANSFORMER
    return None


def _modules(model: Any) -> list[torch.nn.Module]:
    """The torch modules ``model`` is or holds directly (in attributes, or in lists and tuples of them)."""
    if isinstance(model, torch.nn.Module):
        return [model]
    try:
        values = list(vars(model).values())
    except TypeError:
        return []
    found = []
    for value in values:
        items = value if isinstance(value, (list, tuple)) else [value]
        found += [v for v in items if isinstance(v, torch.nn.Module)]
    return found


def _by_layers(modules: list[torch.nn.Module]) -> str | None:
    layers = [layer for module in modules for layer in module.modules()]
    if any(isinstance(layer, _ATTENTION_LAYERS) or type(layer).__module__.startswith("transformers.")
           for layer in layers):
        return TRANSFORMER
    if any(isinstance(layer, _RECURRENT_LAYERS) for layer in layers):
        return RECURRENT
    return None


def model_family(model: Any) -> str:
    """``"transformer"``, ``"recurrent"`` or ``"unknown"``: the family of ``model`` (a target, an adapter, your
    own torch module or a wrapper holding one; the models of a ``SeedModels`` share the first one's)."""
    if isinstance(model, Sequence) and not isinstance(model, (str, bytes, list, tuple)) and len(model) > 0:
        model = model[0]                # SeedModels: the same architecture at every seed
    return _by_name(model) or _by_layers(_modules(model)) or UNKNOWN


def is_built_in(model: Any) -> bool:
    """Whether ``model`` is one of the built-in targets (``train_target``; a ``SeedModels`` of them), whose
    options (``dropout=``, ``early_stopping=``) a remedy may name; a team's own model has its own."""
    if isinstance(model, Sequence) and not isinstance(model, (str, bytes, list, tuple)) and len(model) > 0:
        model = model[0]
    describe = getattr(type(model), "describe", None)
    facts = describe(model) if callable(describe) else None
    return isinstance(facts, dict) and facts.get("kind") in KIND_FAMILIES


def remedy(attack: str, family: str, *, built_in: bool = True) -> str:
    """The remedy of ``attack`` (a key of :data:`FINDINGS`, or ``"cea"``) for a model of ``family``;
    ``built_in=False`` (a team's own model) leaves out the built-in targets' options."""
    if family not in FAMILIES:
        raise ValueError(f"family={family!r} is not a model family; fix: one of {', '.join(FAMILIES)}")
    if attack == "cea":
        return CEA_TRANSFORMER if family == TRANSFORMER else CEA_RECURRENT
    if attack not in FINDINGS:
        raise ValueError(f"attack={attack!r} has no family remedy; fix: one of {', '.join([*FINDINGS, 'cea'])}")
    finding, data = FINDINGS[attack]
    step = data.format(data="fine-tuning" if family == TRANSFORMER else "training")
    options = BUILT_IN_OPTIONS[family] if built_in else ""
    return f"{finding}: {'; '.join([step, *(s.format(built_in=options) for s in STEPS[family])])}"


def remedy_for(attack: str, model: Any) -> str:
    """The remedy of ``attack`` that fits the family of the attacked ``model`` (:func:`model_family`), naming
    the built-in targets' options only for a built-in target (:func:`is_built_in`)."""
    return remedy(attack, model_family(model), built_in=is_built_in(model))
