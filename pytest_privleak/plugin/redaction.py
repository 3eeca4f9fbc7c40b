"""``--privleak-show-secrets``: show the team's canary secrets as they are (issue 34 item 2).

By default a secret from the team's data (``string_pattern``, ``custom_pattern``, ``secret=``) and every
guess of it are redacted in messages, the terminal table, the report and the baseline
(:mod:`pytest_privleak.attacks.redaction`); a developer reading a failure on their own machine turns that
off with the option or ini ``privleak_show_secrets = true``. Every process of the run (xdist workers get the
same options) sets the same mode before any attack runs.
"""
from __future__ import annotations

import pytest

SHOW_KEY = pytest.StashKey[bool]()
_PREVIOUS = pytest.StashKey[bool]()


def pytest_addoption(parser: pytest.Parser) -> None:
    """pytest, at start-up: register ``--privleak-show-secrets`` and its ini default."""
    group = parser.getgroup("privleak", "privacy leakage assertions (pytest-privleak)")
    group.addoption("--privleak-show-secrets", dest="privleak_show_secrets", action="store_true", default=None,
                    help="show secrets from your data (string_pattern, custom_pattern, canary(secret=...)) and the "
                         "attack's guesses of them as they are in messages, the report and the baseline; by "
                         "default they are redacted as <pattern hash len=N> (use on a developer's machine, not in CI)")
    parser.addini("privleak_show_secrets", "default for --privleak-show-secrets (false: secrets from your data are "
                  "redacted)", type="bool", default=False)


def read_show_secrets(config: pytest.Config) -> bool:
    option = config.getoption("privleak_show_secrets", None)
    return bool(option) if option is not None else bool(config.getini("privleak_show_secrets"))


def pytest_configure(config: pytest.Config) -> None:
    """pytest, at configure: redact the team's secrets, or show them when asked."""
    from ..attacks.redaction import set_show_secrets

    show = config.stash[SHOW_KEY] = read_show_secrets(config)
    config.stash[_PREVIOUS] = set_show_secrets(show)


def pytest_unconfigure(config: pytest.Config) -> None:
    """pytest, at exit: give the previous mode back (a run inside a run, pytester, keeps its own)."""
    from ..attacks.redaction import set_show_secrets

    previous = config.stash.get(_PREVIOUS, None)
    if previous is not None:
        set_show_secrets(previous)

