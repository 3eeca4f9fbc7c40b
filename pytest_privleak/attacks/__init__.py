"""Attacks, one module each; import the module you need (keeps ``import pytest_privleak`` free of torch).

- :mod:`.cea`: canary extraction (canary-extraction-nlu §3.1): gradient, trivial and exhaustive.
- :mod:`.candidates`: enumerate and score candidate secrets (shared with exposure).
- :mod:`.cea_assertion`: ``assert_cea_accuracy_at_most``.
"""
