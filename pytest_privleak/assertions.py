"""The public ``assert_*`` helpers: run an attack, build a :class:`LeakResult`, record it, raise.

Each helper is a thin shell: the attack maths lives in ``attacks/`` and
``ldp/``; here the figure meets its threshold and becomes a message. Every
re-exported helper also accepts models trained over several seeds
(``SeedModels``, issue 26) wherever it takes a model: see :func:`over_seeds`.
"""
from __future__ import annotations

from .results import LeakResult, PrivacyLeakError, record


def check(result: LeakResult) -> LeakResult:
    """Record ``result`` on the running test and raise :class:`PrivacyLeakError` if it failed."""
    __tracebackhide__ = True
    record(result)
    if not result.passed:
        raise PrivacyLeakError(result)
    return result


# The public helpers live next to their attack maths and are re-exported here,
# loaded on first use so that importing this module (and ``check``) stays cheap.
_HELPERS = {
    "assert_cea_accuracy_at_most": ".attacks.cea.assertion",
    "assert_exposure_below": ".attacks.exposure.assertion",
    "assert_d_exposure_below": ".attacks.exposure.discriminative_assertion",
    "assert_ldp_holds": ".ldp.assertion",
    "assert_membership_auc_at_most": ".attacks.membership.assertion",
    "assert_membership_tpr_at_most": ".attacks.membership.assertion",
    "assert_mix_and_match_rank_at_least": ".attacks.mix_and_match.assertion",
    "assert_embedding_inversion_at_most": ".embeddings.inversion_assertion",
    "measure_cea": ".attacks.cea.assertion",
    "measure_exposure": ".attacks.exposure.assertion",
    "measure_d_exposure": ".attacks.exposure.discriminative_assertion",
    "measure_ldp": ".ldp.assertion",
    "measure_membership": ".attacks.membership.assertion",
    "measure_mix_and_match": ".attacks.mix_and_match.assertion",
    "measure_embedding_inversion": ".embeddings.inversion_assertion",
    "assert_keyword_inference_at_most": ".embeddings.keyword_assertion",
    "measure_keyword_inference": ".embeddings.keyword_assertion",
    "assert_extraction_at_most": ".attacks.extraction.assertion",
    "measure_extraction": ".attacks.extraction.assertion",
    "assert_untargeted_extraction_at_most": ".attacks.extraction.untargeted_assertion",
    "measure_untargeted_extraction": ".attacks.extraction.untargeted_assertion",
    "assert_pii_exposure_below": ".attacks.extraction.pii.assertion",
    "measure_pii_exposure": ".attacks.extraction.pii.assertion",
    "assert_pii_extraction_at_most": ".attacks.extraction.pii.assertion",
    "measure_pii_extraction": ".attacks.extraction.pii.assertion",
    "assert_dp_training_holds": ".dp.assertion",
    "measure_dp_training": ".dp.audit",
    "assert_dp_sampling_holds": ".dp.sampling_audit",
    "measure_dp_sampling": ".dp.sampling_audit",
}

__all__ = ["check", *sorted(_HELPERS)]


def over_seeds(function):
    """``function`` (an ``assert_*`` / ``measure_*`` helper) that, given models trained over several seeds
    (:class:`~pytest_privleak.targets.seeds.SeedModels`) for any argument, measures each and returns one
    figure over the seeds (:mod:`pytest_privleak.attacks.over_seeds`); other calls pass straight through."""
    from functools import wraps

    @wraps(function)
    def helper(*args, **kwargs):
        __tracebackhide__ = True
        if not _has_seed_models(args, kwargs):
            return function(*args, **kwargs)
        from .attacks.over_seeds import run_over_seeds, seed_sets

        return run_over_seeds(function, args, kwargs, seed_sets(args, kwargs))

    return helper


def _has_seed_models(args: tuple, kwargs: dict) -> bool:
    """Cheap test (no import of the targets package unless it is loaded) for a ``SeedModels`` argument."""
    import sys

    module = sys.modules.get("pytest_privleak.targets.seeds")
    if module is None:
        return False
    values = (*args, *kwargs.values())
    items = [item for v in values if isinstance(v, (list, tuple)) for item in v]  # one model per canary
    return any(isinstance(v, module.SeedModels) for v in (*values, *items))


def __getattr__(name: str):
    if name in _HELPERS:
        from importlib import import_module

        helper = over_seeds(getattr(import_module(_HELPERS[name], __package__), name))
        globals()[name] = helper  # resolved once
        return helper
    raise AttributeError(f"module 'pytest_privleak.assertions' has no attribute {name!r}")
