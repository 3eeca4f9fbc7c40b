"""Mix And Match (mix-and-match-text-classifiers): :mod:`.canaries` (labelled sentences with one target
token, §4.2, §5.3), :mod:`.attack` (the attack of §4.3 and the exhaustive baseline of §5.1.4)
and :mod:`.assertion` (``assert_mix_and_match_rank_at_least``); the exposure
of a canary's token is ``attacks.exposure.mask_canary``.
"""

_LAZY = {"mix_and_match_model": ".attack", "mix_and_match": ".attack", "frankenstein": ".attack",
         "mask_canary": ".canaries", "contradicting_canaries": ".canaries", "inject_mask_canaries": ".canaries"}


def __getattr__(name: str):
    """The names the docs import from ``pytest_privleak.attacks.mix_and_match``, loaded on first use (torch)."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
