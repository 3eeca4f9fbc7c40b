"""Embedding leakage (privacy-risks-language-model-embeddings): attacks on an ``Encoder``'s sentence embeddings.

* ``patterns``: generators of Citizen-ID and genome texts (§V);
* ``inversion`` / ``inversion_assertion``: pattern reconstruction (§V);
* ``keywords`` / ``keyword_assertion``: keyword inference, white-box and DANN (§VI);
* ``defences``: rounding, Laplace noise, privacy-preserving mapping, subspace projection (§VII), as wrapped encoders;
* ``utility``: the downstream accuracy a defence keeps;
* ``corpora``: generated medical-, airline- and restaurant-style stand-ins for the paper's corpora.

Nothing here imports torch until an attack is asked for.
"""
from __future__ import annotations

from importlib import import_module
from typing import Any

_LAZY: dict[str, str] = {
    "CitizenIdPattern": ".patterns",
    "GenomePattern": ".patterns",
    "get_pattern": ".patterns",
    "invert_embeddings": ".inversion",
    "measure_embedding_inversion": ".inversion_assertion",
    "assert_embedding_inversion_at_most": ".inversion_assertion",
    "medical_corpus": ".corpora",
    "airline_corpus": ".corpora",
    "restaurant_corpus": ".corpora",
    "MEDICAL_KEYWORDS": ".corpora",
    "AIRLINE_KEYWORDS": ".corpora",
    "infer_keywords": ".keywords",
    "measure_keyword_inference": ".keyword_assertion",
    "assert_keyword_inference_at_most": ".keyword_assertion",
    "rounded": ".defences",
    "laplace_noise": ".defences",
    "estimate_l1_sensitivity": ".defences",
    "privacy_preserving_mapping": ".defences",
    "subspace_projection": ".defences",
    "measure_utility": ".utility",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module 'pytest_privleak.embeddings' has no attribute {name!r}")
