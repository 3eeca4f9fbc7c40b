"""Where the plugin's data files live.

The design fixes them at the top-level ``fixtures/`` folder of the
repository, next to the ``pytest_privleak`` package.  That resolves from the
source tree and from an editable install (``pip install -e .``, as the README
installs).  ``PRIVLEAK_FIXTURES_DIR`` overrides the location, e.g. for a
non-editable install that ships ``fixtures/`` elsewhere.
"""
from __future__ import annotations

import os
from pathlib import Path

FIXTURES_ENV = "PRIVLEAK_FIXTURES_DIR"


def fixtures_dir() -> Path:
    """The ``fixtures/`` folder: ``$PRIVLEAK_FIXTURES_DIR`` or ``<package parent>/fixtures``."""
    override = os.environ.get(FIXTURES_ENV)
    path = Path(override) if override else Path(__file__).resolve().parents[2] / "fixtures"
    if not path.is_dir():
        raise FileNotFoundError(
            f"pytest-privleak data folder {path} not found; fix: install from a source checkout "
            f"with `pip install -e .`, or set {FIXTURES_ENV} to the repository's fixtures/ folder"
        )
    return path
