"""The word substitution trick of privacy-risks-language-model-embeddings §VI-B, shared by attacks and defences.

"Randomly replace certain word in the negative samples with the keyword, and
replace the keyword in the positive samples with other random word in the
vocabulary": every text then has a twin that differs from it only by the
keyword's presence, which balances the classes (the corpus is twice enlarged)
and gives the pairs of the sensitivity estimate (App. C) and of the subspace
defence. Texts are lower-case words separated by single spaces.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def has_word(text: str, keyword: str) -> bool:
    """The predicate ``P_keyword,k`` of §VI-A: some word of ``text`` is ``keyword``."""
    return keyword in text.split()


def vocabulary(texts: Sequence[str]) -> list[str]:
    """The attacker's own vocabulary: every word of ``texts``, sorted (deterministic)."""
    return sorted({w for t in texts for w in t.split()})


def _replace(text: str, keyword: str, rng: np.random.Generator, words: list[str]) -> str:
    tokens = text.split()
    if keyword in tokens:                              # positive -> negative: the keyword becomes another word
        others = [w for w in words if w != keyword]
        return " ".join(others[int(rng.integers(len(others)))] if t == keyword else t for t in tokens)
    tokens[int(rng.integers(len(tokens)))] = keyword   # negative -> positive: one random word becomes the keyword
    return " ".join(tokens)


def substitution_twins(texts: Sequence[str], keyword: str, rng: np.random.Generator,
                       words: list[str] | None = None) -> list[str]:
    """For each text its twin: the keyword swapped out (a positive) or swapped in (a negative)."""
    words = vocabulary(texts) if words is None else words
    return [_replace(t, keyword, rng, words) for t in texts]


def with_and_without(texts: Sequence[str], keyword: str, rng: np.random.Generator) -> tuple[list[str], list[str]]:
    """Aligned pairs ``(with[i], without[i])`` that differ only by the keyword (one per text)."""
    twins = substitution_twins(texts, keyword, rng)
    with_k, without_k = [], []
    for text, twin in zip(texts, twins):
        pos, neg = (text, twin) if has_word(text, keyword) else (twin, text)
        with_k.append(pos)
        without_k.append(neg)
    return with_k, without_k


def substitute_one(texts: Sequence[str], rng: np.random.Generator) -> list[str]:
    """Each text with one word (one character, for a text without spaces) replaced by another of the corpus."""
    words = vocabulary(texts)
    chars = sorted({c for t in texts for c in t if c != " "})
    out = []
    for t in texts:
        if " " in t.strip():
            tokens = t.split()
            i = int(rng.integers(len(tokens)))
            others = [w for w in words if w != tokens[i]] or words
            tokens[i] = others[int(rng.integers(len(others)))]
            out.append(" ".join(tokens))
        else:
            i = int(rng.integers(len(t)))
            others = [c for c in chars if c != t[i]] or chars
            out.append(t[:i] + others[int(rng.integers(len(others)))] + t[i + 1:])
    return out
