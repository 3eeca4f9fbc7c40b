"""The attack modules' import paths from before issue 31 keep working, with a ``DeprecationWarning``.

``pytest_privleak.attacks.membership_rmia`` is now ``pytest_privleak.attacks.membership.rmia``; a
finder on ``sys.meta_path`` answers only the old names and hands back the module at its new path (the
same module object, so patching either name patches both). The five families' old single modules
(``attacks.cea``, ``attacks.exposure`` ...) are the packages' names now; of those, the docs showed only
``attacks.mix_and_match``, whose names its package still gives.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

_PACKAGE = "pytest_privleak"
#: Old dotted path (below the package) -> new one.
MOVED = {
    "attacks.cea_assertion": "attacks.cea.assertion",
    "attacks.exposure_figure": "attacks.exposure.figure",
    "attacks.exposure_assertion": "attacks.exposure.assertion",
    "attacks.d_exposure": "attacks.exposure.discriminative",
    "attacks.d_exposure_assertion": "attacks.exposure.discriminative_assertion",
    "attacks.membership_assertion": "attacks.membership.assertion",
    "attacks.membership_figures": "attacks.membership.figures",
    "attacks.membership_lira": "attacks.membership.lira",
    "attacks.membership_methods": "attacks.membership.methods",
    "attacks.membership_records": "attacks.membership.records",
    "attacks.membership_reference_free": "attacks.membership.reference_free",
    "attacks.membership_references": "attacks.membership.references",
    "attacks.membership_rmia": "attacks.membership.rmia",
    "attacks.extraction_assertion": "attacks.extraction.assertion",
    "attacks.extraction_search": "attacks.extraction.search",
    "attacks.untargeted_extraction": "attacks.extraction.untargeted",
    "attacks.untargeted_extraction_assertion": "attacks.extraction.untargeted_assertion",
    "attacks.pii_exposure": "attacks.extraction.pii.attack",
    "attacks.pii_exposure_assertion": "attacks.extraction.pii.assertion",
    "attacks.pii_generation": "attacks.extraction.pii.generation",
    "attacks.pii_redaction": "attacks.extraction.pii.redaction",
    "attacks.mix_and_match_assertion": "attacks.mix_and_match.assertion",
    "attacks.mix_and_match_canaries": "attacks.mix_and_match.canaries",
    "attacks.mix_and_match_exposure": "attacks.exposure.mask_canary",
    "attacks.dp_training": "dp.audit",
    "attacks.dp_training_assertion": "dp.assertion",
}
_OLD_TO_NEW = {f"{_PACKAGE}.{old}": f"{_PACKAGE}.{new}" for old, new in MOVED.items()}


class _Alias(importlib.abc.Loader):
    def __init__(self, new: str) -> None:
        self.new = new

    def create_module(self, spec):
        warnings.warn(f"{spec.name} moved to {self.new} (issue 31); import it from there",
                      DeprecationWarning, stacklevel=2)
        return importlib.import_module(self.new)

    def exec_module(self, module) -> None:
        """The module at its new path is already executed."""


class _MovedFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        new = _OLD_TO_NEW.get(fullname)
        return importlib.util.spec_from_loader(fullname, _Alias(new)) if new else None


def install() -> None:
    """Put the finder on ``sys.meta_path`` once (``attacks/__init__`` calls it)."""
    if not any(isinstance(finder, _MovedFinder) for finder in sys.meta_path):
        sys.meta_path.append(_MovedFinder())
