"""pytest-privleak: privacy-leakage attacks on NLP models as pytest assertions.

Public names are loaded lazily so that pytest start-up never imports torch.
"""
from __future__ import annotations

from importlib import import_module
from typing import Any

__version__ = "0.1.0"

_PUBLIC = {
    "LeakResult": ".results",
    "NonFiniteError": ".finite",
    "PrivacyLeakError": ".results",
    "expect_leak": ".results",
    "InconclusiveAuditError": ".attacks.inconclusive",
    "UnsignedCacheWarning": ".cache.manifest",
    "SeedModels": ".targets.seeds",
    "OneDrawWarning": ".targets.seeds",
    "TargetRecipe": ".attacks.membership.references",
    "assert_cea_accuracy_at_most": ".assertions",
    "assert_exposure_below": ".assertions",
    "assert_d_exposure_below": ".assertions",
    "assert_ldp_holds": ".assertions",
    "assert_membership_auc_at_most": ".assertions",
    "assert_membership_tpr_at_most": ".assertions",
    "assert_mix_and_match_rank_at_least": ".assertions",
    "assert_embedding_inversion_at_most": ".assertions",
    "measure_cea": ".assertions",
    "measure_exposure": ".assertions",
    "measure_d_exposure": ".assertions",
    "measure_ldp": ".assertions",
    "measure_membership": ".assertions",
    "measure_mix_and_match": ".assertions",
    "measure_embedding_inversion": ".assertions",
    "assert_keyword_inference_at_most": ".assertions",
    "measure_keyword_inference": ".assertions",
    "assert_extraction_at_most": ".assertions",
    "measure_extraction": ".assertions",
    "assert_untargeted_extraction_at_most": ".assertions",
    "measure_untargeted_extraction": ".assertions",
    "assert_pii_exposure_below": ".assertions",
    "measure_pii_exposure": ".assertions",
    "assert_pii_extraction_at_most": ".assertions",
    "measure_pii_extraction": ".assertions",
    "assert_dp_training_holds": ".assertions",
    "measure_dp_training": ".assertions",
    "assert_dp_sampling_holds": ".assertions",
    "measure_dp_sampling": ".assertions",
    "generate_from_prefixes": ".adapters.generation",
    "canary": ".canaries",
    "CanarySet": ".canaries",
    "custom_pattern": ".canaries",
    "string_pattern": ".canaries",
    "inject_canaries": ".canaries",
    "mask_canary": ".attacks.mix_and_match.canaries",
    "mix_and_match_model": ".attacks.mix_and_match.attack",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    if name in _PUBLIC:
        return getattr(import_module(_PUBLIC[name], __name__), name)
    raise AttributeError(f"module 'pytest_privleak' has no attribute {name!r}")
