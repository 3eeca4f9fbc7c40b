"""Secrets from the team's data are redacted in messages, reports and baselines (issue 34 item 2).

A failing exposure or extraction quotes the canary and each guess of it. For a
canary the library drew (``canary("pin")``: a random pin of a built-in pattern)
that is harmless, but a secret the team wrote (``string_pattern``,
``custom_pattern``, or ``canary(..., secret=...)``: possibly a customer's real
number) would be copied into every CI log, report and baseline that quotes
it. Such a secret, and every guess of it, is shown as
``<account 3fa2c1d0 len=4>``: the pattern's name, a keyed short hash and its
length in characters (spaces between its tokens not counted). The prefix
("my account number is") is the team's template, not the secret, and stays.

The hash is an HMAC-SHA256 of the pattern name and the secret, so it is the
same in every run (a result's label, its key in the report and the baseline,
stays stable) and a guess that equals the secret shows the same hash. Its key
is ``$PRIVLEAK_REDACTION_KEY`` when set (a CI secret), else a fixed public
default: with the default, a reader who knows the pattern can hash every
candidate of a small space (10^4 pins) and find the secret, so the default
keeps the secret out of sight, not out of reach; set the variable for a hash
nobody without it can test. Changing the key renames those results: save the
baseline again.

``--privleak-show-secrets`` (ini ``privleak_show_secrets``) shows the secrets
as they are, e.g. on a developer's machine (:func:`set_show_secrets`). The PII
audit's items use the same keyed hash (:func:`redact`) with a key derived from
the training texts (:mod:`.extraction.pii.redaction`).
"""
from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["redact", "is_team_secret", "shown_secret", "shown_text", "redaction_note", "redaction_tag",
           "set_show_secrets", "shows_secrets", "KEY_ENV", "REDACTION"]

#: Environment variable holding the key of the secrets' hash (unset: a public default key).
KEY_ENV = "PRIVLEAK_REDACTION_KEY"
_DEFAULT_KEY = b"pytest-privleak canary redaction, public default key v1"
#: Evidence key of the line saying what was redacted (the report shows that it redacted).
REDACTION = "redaction"

_show = False


def redact(kind: str, text: str, key: bytes, length: int | None = None) -> str:
    """``<kind hash8 len=N>``: an item without its text (``length`` defaults to ``len(text)``)."""
    tag = hmac.new(key, f"{kind}\x00{text}".encode("utf-8"), hashlib.sha256).hexdigest()[:8]
    return f"<{kind} {tag} len={len(text) if length is None else length}>"


def set_show_secrets(show: bool) -> bool:
    """Show the team's secrets as they are (``True``) or redacted (``False``, the default); returns the previous."""
    global _show
    if not isinstance(show, bool):
        raise TypeError(f"show_secrets must be True or False, got {show!r}")
    previous, _show = _show, show
    return previous


def shows_secrets() -> bool:
    return _show


def _key() -> bytes:
    given = os.environ.get(KEY_ENV, "")
    return given.encode("utf-8") if given else _DEFAULT_KEY


def key_is_default() -> bool:
    return not os.environ.get(KEY_ENV, "")


def is_team_secret(canary: Any) -> bool:
    """Whether ``canary``'s secret may come from the team's data: a pattern the team built (``string_pattern``,
    ``custom_pattern``) or a secret the caller gave (``secret=``). A secret the library drew for a built-in
    pattern (``canary("pin")``) is not."""
    from ..canaries import PATTERNS, secret_was_given

    pattern = getattr(canary, "pattern", None)
    if pattern is None:
        return False
    builtin = PATTERNS.get(pattern.name)
    drawn = builtin is not None and builtin.with_length(pattern.length) == pattern and not secret_was_given(canary)
    return not drawn


def _redacted(canary: Any) -> bool:
    return not _show and is_team_secret(canary)


def shown_secret(canary: Any, tokens: Sequence[str] | str | None = None) -> str:
    """The secret of ``canary`` (or ``tokens``, a guess of it) as messages show it: as it is, or redacted."""
    tokens = canary.secret if tokens is None else tokens
    tokens = tuple(tokens.split()) if isinstance(tokens, str) else tuple(tokens)
    text = " ".join(tokens)
    if not _redacted(canary):
        return text
    return redact(canary.pattern.name, text, _key(), length=sum(len(t) for t in tokens))


def shown_text(canary: Any) -> str:
    """The canary's sentence as messages show it: its prefix, then :func:`shown_secret`."""
    if not _redacted(canary):
        return canary.text
    return " ".join((*canary.pattern.prefix, shown_secret(canary)))


def redaction_note(canaries: Iterable[Any]) -> dict[str, str]:
    """``{"redaction": why}`` when a secret of ``canaries`` is shown redacted, else ``{}`` (evidence line)."""
    if _show or not any(is_team_secret(c) for c in canaries):
        return {}
    key = (f"a hash keyed by ${KEY_ENV}" if not key_is_default() else
           f"a hash under the public default key (set ${KEY_ENV} to a CI secret so nobody can test candidates "
           "against it)")
    return {REDACTION: f"redacted: the secret from your data and every guess of it are shown as <pattern hash len=N>, "
                       f"{key}; --privleak-show-secrets (ini privleak_show_secrets) shows them"}


def redaction_tag(canaries: Iterable[Any]) -> str:
    """What the shown texts of ``canaries`` depend on, for a result-cache key: redacted or not, and under which
    key (a cached result keeps the texts it was computed with)."""
    flags = ["1" if _redacted(c) else "0" for c in canaries]
    if "1" not in flags:
        return "as is"
    return "redacted " + "".join(flags) + " " + hashlib.sha256(b"key\x00" + _key()).hexdigest()[:16]
