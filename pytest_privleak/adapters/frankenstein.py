"""The Frankenstein model of mix-and-match-text-classifiers §4.3.1: a fine-tuned classifier's encoder under the
generation head of the masked LM it was fine-tuned from. The Mix And Match attack reads training text from it
(:mod:`pytest_privleak.attacks.mix_and_match.attack`); membership compares its masked-piece predictions with
the base's (:mod:`pytest_privleak.attacks.membership.base_reference`, through the transformer-classifier
target). Shared by both, so it lives below them.
"""
from __future__ import annotations

import copy
from typing import Any

import torch

__all__ = ["frankenstein"]


def frankenstein(classifier: Any, generator: Any) -> Any:
    """§4.3.1: a copy of the base masked LM ``generator`` whose encoder is the fine-tuned one of ``classifier``.

    The generation head keeps the base LM's own weights; its decoder, tied to
    the input embeddings in BERT, is untied first so that loading the
    fine-tuned embeddings does not change the head. Nothing is fine-tuned.
    """
    if not hasattr(generator, "get_output_embeddings") or generator.get_output_embeddings() is None:
        raise TypeError(f"generator must be the base model with its masked-LM head (AutoModelForMaskedLM), got "
                        f"{type(generator).__name__}; fix: load the base with AutoModelForMaskedLM.from_pretrained")
    if not hasattr(classifier, "base_model") or classifier.base_model is classifier:
        raise TypeError(f"classifier must be a transformers classifier with a base encoder (e.g. "
                        f"AutoModelForSequenceClassification), got {type(classifier).__name__}")
    model = copy.deepcopy(generator).eval()
    head = model.get_output_embeddings()
    head.weight = torch.nn.Parameter(head.weight.detach().clone(), requires_grad=False)
    model.config.tie_word_embeddings = False
    fine_tuned = {k: v for k, v in classifier.base_model.state_dict().items() if not k.startswith("pooler.")}
    missing, unexpected = model.base_model.load_state_dict(fine_tuned, strict=False)
    missing = [k for k in missing if not k.startswith("pooler.")]
    if missing or unexpected:
        raise ValueError(f"the classifier's encoder does not fit the generator's (missing {missing[:4]}, unexpected "
                         f"{unexpected[:4]}); fix: pass the masked LM the classifier was fine-tuned from")
    for p in model.parameters():
        p.requires_grad_(False)
    return model.to(next(classifier.parameters()).device)
