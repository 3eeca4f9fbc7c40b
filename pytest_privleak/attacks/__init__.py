"""Attacks, one sub-package per family; import the module you need (``import pytest_privleak`` stays free of torch).

Families, each with its attack, its assertion and its pieces:

- :mod:`.cea`: canary extraction on a soft-input model (canary-extraction-nlu §3.1).
- :mod:`.exposure`: exposure of a canary (the Secret Sharer) and d-exposure of taggers
  (d-exposure-discriminative).
- :mod:`.membership`: membership inference: RMIA, LiRA, the loss and reference-free statistics.
- :mod:`.extraction`: extraction by generation, untargeted extraction and the PII in a training set.
- :mod:`.mix_and_match`: token reconstruction against BERT classifiers (mix-and-match-text-classifiers).

What several families share stays here: :mod:`.candidates` (enumerating and scoring candidate secrets),
:mod:`.over_seeds` (one figure over training seeds), :mod:`.inconclusive` (an audit cut short is not a
pass) and :mod:`.remedies` (the remedy for the model family at hand). The DP-SGD audit is the ``dp`` wing.
The import paths from before issue 31 (``attacks.membership_rmia`` ...) still load, with a warning
(:mod:`.moved`).
"""
from . import moved as _moved

_moved.install()
