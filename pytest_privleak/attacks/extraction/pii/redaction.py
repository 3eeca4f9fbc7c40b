"""PII in results and reports is redacted by default: its kind, a keyed short hash and its length.

A privacy report that quotes the phone numbers it found would itself leak them
(reports are shared, uploaded as CI artefacts and stored beside baselines).
An item is shown as ``<phone 3fa2c1d0 len=12>``: the hash tells items apart and
stays the same across runs (labels and baselines stay stable), but it is keyed:
an HMAC-SHA256 whose key is derived from the training texts themselves (or a
``salt`` the user gives, e.g. a CI secret), so a reader without the data cannot
hash the ``10^10`` phone numbers and look the item up.  ``show_pii=True`` is the
explicit opt-in to print texts as they are. The keyed hash itself is shared with the
redaction of the team's canary secrets (:func:`pytest_privleak.attacks.redaction.redact`).
"""
from __future__ import annotations

import hashlib
from collections.abc import Iterable

from ...redaction import redact

__all__ = ["redaction_key", "redact"]

_DOMAIN = b"pytest-privleak pii redaction key v1\x00"


def redaction_key(texts: Iterable[str], salt: str | bytes | None = None) -> bytes:
    """The HMAC key: from ``salt`` when given, else from the training ``texts`` (never from a public hash of them)."""
    digest = hashlib.sha256(_DOMAIN)
    if salt is not None:
        if not isinstance(salt, (str, bytes)) or not salt:
            raise ValueError(f"salt must be a non-empty string or bytes, or None (derived from the data), got "
                             f"{salt!r}; fix: e.g. salt=os.environ['PRIVLEAK_SALT']")
        digest.update(b"salt\x00" + (salt.encode("utf-8") if isinstance(salt, str) else salt))
        return digest.digest()
    for text in texts:
        digest.update(text.encode("utf-8") + b"\x00")
    return digest.digest()
