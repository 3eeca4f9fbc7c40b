"""Small corpora the training tests share: a Snips-like set with a pin, a CoNLL-like set, and one with random
intents (so each model overfits and stops early at an epoch of its own)."""
from __future__ import annotations

import random

from pytest_privleak.canaries import canary, inject_canaries
from pytest_privleak.data.synthetic import generate_snips_like
from pytest_privleak.data.synthetic_ner import generate_ner_like
from pytest_privleak.data.types import Utterance


def snips_with_pin():
    return inject_canaries(generate_snips_like(n_train=70, n_valid=20, n_test=20, seed=1), canary("pin", 4, seed=3),
                           repeats=5)


def small_ner():
    return generate_ner_like(n_train=60, n_valid=10, n_test=10, seed=5)


def noisy_intents():
    """60 training and 30 validation utterances whose intents are drawn at random (seed 0)."""
    rng = random.Random(0)
    base = generate_snips_like(n_train=60, n_valid=30, n_test=0, seed=5)
    intents = sorted({u.intent for u in base.all_utterances()})

    def noisy(items):
        return tuple(Utterance(u.tokens, u.tags, rng.choice(intents)) for u in items)

    return base.replace(train=noisy(base.train), valid=noisy(base.valid))
