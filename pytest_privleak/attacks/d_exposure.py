"""d-exposure: memorisation of an inserted ambiguous phrase by a discriminative tagger.

d-exposure-discriminative §3.1.  A phrase such as "There are many people who
like ___" is filled with a word ``s`` that can belong to several entity
classes ("Williams": person or organisation) and inserted into the training
data with ``s`` labelled ``C_i``.  A model that generalises stays unsure about
``s``; a model that memorised the phrase labels it with high confidence.
Against the words ``W_i`` labelled *only* ``C_i`` in the training data, each
put in the same phrase (eq. 2):

    d-exposure_{C_i}(s) = -log2 Pr_{w in C_i}[conf(w) >= conf(s)]

* ``conf(w)`` is the model's probability of label ``B-C_i`` (a one-word
  entity; ``S-C_i`` in the paper's BIOES) at the blank, read from the token
  scorer (for a CRF, its marginal);
* it is zero when ``s`` is mislabelled (its most probable label is not
  ``B-C_i``), and a word of ``W_i`` the model mislabels counts as less
  confident than ``s``;
* the population is ``W_i`` together with ``s`` (so ``s`` ranks against
  itself, ties against ``s``, as in exposure): with ``k`` correctly labelled
  words at least as confident, ``Pr = (1 + k) / (|W_i| + 1)``.  This keeps the
  paper's range ``[0, log2 |C_i|]`` with ``|C_i| = |W_i| + 1`` and is finite
  when ``s`` beats every word.

Eq. 3 averages over the chosen classes.  Chance (a correctly labelled ``s``
whose rank is uniform) is ``log2 M - log2(M!)/M`` for ``M = |W_i| + 1``, about
``log2 e = 1.44`` bits, which matches the paper's S-LOC row at 0 repetitions
(Table 3: 1.33-1.76).

The scorer's output is checked before it becomes a figure: NaN compares
false with every confidence, so a NaN model would read as "s mislabelled",
0 bits, and pass; probabilities that are non-finite, outside [0, 1], or not
one ``[tokens, labels]`` array per sentence are errors naming the fix.
"""
from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .exposure_figure import chance_exposure

#: The paper's ambiguous phrase format (§4.1).
DEFAULT_TEMPLATE = "There are many people who like ___"
BLANK = "___"
#: The paper's insertions (§4.1): "Williams" as S-ORG, "Chelsea" as S-PER, "Melbourne" as S-LOC.
PAPER_INSERTIONS = {"ORG": "Williams", "PER": "Chelsea", "LOC": "Melbourne"}
#: Repetitions of §4.2 (0 = not inserted).
PAPER_REPEATS = (0, 4, 16, 64, 128, 256)
#: How far outside [0, 1] a probability may round: CRF marginals are exp(log-marginals) summed in
#: float32 and land a few float32 steps above 1; logits mistaken for probabilities land far outside.
PROBABILITY_SLACK = 1e-3


def template_tokens(template: Sequence[str] | str) -> tuple[tuple[str, ...], int]:
    """``(tokens, blank index)`` of a phrase template with exactly one ``___``."""
    tokens = tuple(template.split()) if isinstance(template, str) else tuple(template)
    blanks = [i for i, t in enumerate(tokens) if t == BLANK]
    if len(blanks) != 1:
        raise ValueError(f"template {' '.join(tokens)!r} must contain exactly one {BLANK!r} for the "
                         f"ambiguous word, found {len(blanks)}; fix: e.g. {DEFAULT_TEMPLATE!r}")
    return tokens, blanks[0]


def fill(template: Sequence[str] | str, word: str) -> tuple[str, ...]:
    tokens, blank = template_tokens(template)
    return tokens[:blank] + (word,) + tokens[blank + 1:]


def ambiguous_phrase(word: str, entity_class: str, template: Sequence[str] | str = DEFAULT_TEMPLATE,
                     intent: str = "ner"):
    """The phrase to insert: the template filled with ``word`` tagged ``B-<entity_class>``, the rest ``O``."""
    from ..data.types import Utterance

    tokens, blank = template_tokens(template)
    tags = ["O"] * len(tokens)
    tags[blank] = f"B-{entity_class}"
    return Utterance(fill(tokens, word), tuple(tags), intent)


def insert_phrases(dataset: Any, phrases: Sequence[Any], repeats: int, seed: int = 0) -> Any:
    """A copy of ``dataset`` with ``repeats`` copies of each phrase at seeded positions of the training split.

    The paper inserts into the training set only (§4.2); ``repeats=0`` returns the dataset unchanged.
    """
    if not isinstance(repeats, int) or isinstance(repeats, bool) or repeats < 0:
        raise ValueError(f"repeats must be an integer >= 0 (the paper uses {PAPER_REPEATS}), got {repeats!r}")
    if repeats == 0:
        return dataset
    extra = [p for p in phrases for _ in range(repeats)]
    rng = random.Random(f"d-exposure-insert:{seed}")
    total = len(dataset.train) + len(extra)
    slots = set(rng.sample(range(total), len(extra)))
    originals, extras = iter(dataset.train), iter(extra)
    train = tuple(next(extras) if i in slots else next(originals) for i in range(total))
    label = ",".join(f"{p.tokens[i]}:{t[2:]}" for p in phrases for i, t in enumerate(p.tags) if t != "O")
    return dataset.replace(train=train, name=f"{dataset.name}+phrases[{label}]x{repeats}")


def exclusive_class_words(dataset: Any, classes: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """For each class, the words of ``dataset.train`` labelled only as a one-word entity of that class (``W_i``).

    A word qualifies when every one of its occurrences is tagged ``B-C`` with no ``I-C`` after it.
    """
    labels: dict[str, set[str]] = defaultdict(set)
    for u in dataset.train:
        tags = u.tags
        for i, (word, tag) in enumerate(zip(u.tokens, tags)):
            single = tag.startswith("B-") and (i + 1 == len(tags) or tags[i + 1] != f"I-{tag[2:]}")
            labels[word].add(tag[2:] if single else f"<{tag}>")
    out = {c: tuple(sorted(w for w, found in labels.items() if found == {c})) for c in classes}
    empty = [c for c, words in out.items() if not words]
    if empty:
        raise ValueError(f"no word of the training data is labelled only as {empty} (one-word entities); "
                         "fix: check the class names (slot names such as 'PER', without 'B-') or pass class_words")
    return out


@dataclass
class ClassDExposure:
    """Eq. 2 for one class."""

    entity_class: str
    word: str
    value: float
    confidence: float
    predicted: str
    at_least: int          # correctly labelled class words with conf >= conf(s)
    n_words: int           # |W_i|
    ceiling: float         # log2(|W_i| + 1)
    chance: float


@dataclass
class DExposure:
    """Eq. 3: the mean of eq. 2 over the classes, with the per-class figures."""

    value: float
    per_class: dict[str, ClassDExposure] = field(default_factory=dict)
    chance: float = 0.0
    ceiling: float = 0.0
    phrase_text: str = ""


def class_d_exposure(conf_s: float, s_correct: bool, conf_words: np.ndarray,
                     words_correct: np.ndarray) -> tuple[float, int]:
    """``(eq. 2 value, k)`` from confidences; see the module docstring for the conventions."""
    conf_words = np.asarray(conf_words, dtype=np.float64)
    words_correct = np.asarray(words_correct, dtype=bool)
    k = int(np.count_nonzero(words_correct & (conf_words >= conf_s)))
    if not s_correct:
        return 0.0, k
    return float(np.log2(conf_words.size + 1) - np.log2(1 + k)), k


def check_insertions(inserted: Any, class_words: Any) -> None:
    """Raise naming the bad entry of ``inserted`` (class -> word) or ``class_words`` (class -> words), and the fix.

    Each word fills the blank as one token, so it must be a token (no whitespace,
    no control characters); a string given as a class's word list would be read
    letter by letter.
    """
    from ..data.types import token_problem

    if not isinstance(inserted, Mapping) or not inserted:
        raise ValueError(f"inserted must be a non-empty mapping of entity class to inserted word, got "
                         f"{inserted!r}; fix: e.g. inserted={PAPER_INSERTIONS}")
    if not isinstance(class_words, Mapping):
        raise TypeError(f"class_words must map each class to its words, got {type(class_words).__name__}; "
                        "fix: pass e.g. {'PER': ['Ann', 'Bob']} or the training dataset")
    for cls, word in inserted.items():
        problem = token_problem(word)
        if problem:
            raise ValueError(f"inserted[{cls!r}] ({word!r}) {problem}; the word fills the blank as one token; "
                             f"fix: insert a one-word entity, e.g. {PAPER_INSERTIONS}")
        words = class_words.get(cls, ())
        if isinstance(words, str) or not isinstance(words, Sequence):
            raise TypeError(f"class_words[{cls!r}] is {type(words).__name__} ({words!r}), not a list of words; "
                            f"fix: class_words[{cls!r}] = [word, ...] (a string would be read letter by letter)")
        for i, w in enumerate(words):
            problem = token_problem(w)
            if problem:
                raise ValueError(f"class_words[{cls!r}][{i}] ({w!r}) {problem}; fix: give one-word entities "
                                 "only (each fills the blank as one token)")


def blank_probabilities(scorer: Any, sentences: Sequence[tuple[str, ...]], blank: int,
                        labels: Sequence[str]) -> np.ndarray:
    """``[S, n_labels]`` label probabilities at the blank, checked: one finite row of probabilities per sentence.

    What a token scorer returns is checked before it becomes a figure: a
    NaN confidence compares false with everything and would report 0 bits, and
    fewer arrays than sentences (or fewer rows than tokens) would misalign
    words and confidences.
    """
    from ..finite import require_finite

    name = type(scorer).__name__
    out = scorer.token_label_probs(sentences)
    out = None if isinstance(out, (str, bytes)) or not hasattr(out, "__iter__") else list(out)
    if out is None or len(out) != len(sentences):
        got = "not a list" if out is None else f"{len(out)} arrays"
        raise ValueError(f"{name}.token_label_probs returned {got} for {len(sentences)} sentences; fix: return "
                         "one [n_tokens, n_labels] array of label probabilities per sentence, in order")
    expected = (len(sentences[0]), len(labels))
    arrays = [np.asarray(p.detach().cpu() if hasattr(p, "detach") else p, dtype=np.float64) for p in out]
    wrong = next((i for i, a in enumerate(arrays) if a.shape != expected), None)
    if wrong is not None:
        raise ValueError(f"{name}.token_label_probs returned shape {list(arrays[wrong].shape)} for sentence "
                         f"{wrong} ({' '.join(sentences[wrong])!r}), expected {list(expected)} ({expected[0]} "
                         f"tokens x {expected[1]} labels {list(labels)}); fix: one row per token, one column per "
                         "label of scorer.labels")
    probs = np.stack(arrays)
    require_finite(probs, what=f"the label probabilities {name}.token_label_probs returned for the d-exposure "
                                "phrases", fix="check the tagger for NaN or infinite weights (retrain it) and "
                                               "that it returns softmax probabilities or CRF marginals")
    if probs.min() < -PROBABILITY_SLACK or probs.max() > 1.0 + PROBABILITY_SLACK:
        raise ValueError(f"{name}.token_label_probs returned values in [{probs.min():.4g}, {probs.max():.4g}], "
                         "not probabilities; fix: return softmax probabilities or CRF marginals, not logits")
    return probs[:, blank]


def d_exposure(scorer: Any, inserted: Mapping[str, str], class_words: Mapping[str, Sequence[str]],
               template: Sequence[str] | str = DEFAULT_TEMPLATE) -> DExposure:
    """d-exposure (eqs. 2-3) of the ``inserted`` words (class -> word) under a token scorer, one batched call.

    The scorer's probabilities are checked (:func:`blank_probabilities`): NaN,
    infinite, out of [0, 1] or misshapen output is an error, never 0 bits.
    """
    check_insertions(inserted, class_words)
    labels = list(getattr(scorer, "labels", ()))
    if not labels or not hasattr(scorer, "token_label_probs"):
        raise TypeError(f"{type(scorer).__name__} is not a token scorer; it needs labels and "
                        "token_label_probs(sentences), see pytest_privleak.protocols.TokenScorer")
    tokens, blank = template_tokens(template)
    sentences, spans = [], {}
    for cls, word in inserted.items():
        if f"B-{cls}" not in labels:
            raise ValueError(f"class {cls!r}: the model has no label 'B-{cls}' (its labels: {labels}); "
                             "fix: name classes by their slot, e.g. 'PER'")
        words = [w for w in class_words.get(cls, ()) if w != word]
        if not words:
            raise ValueError(f"class {cls!r} has no reference words; fix: pass class_words[{cls!r}] or the "
                             "training dataset")
        spans[cls] = (len(sentences), words)
        sentences.extend(fill(tokens, w) for w in [word, *words])
    probs = blank_probabilities(scorer, sentences, blank, labels)   # [S, n_labels]
    predicted = probs.argmax(axis=1)
    per_class = {}
    for cls, word in inserted.items():
        start, words = spans[cls]
        col = labels.index(f"B-{cls}")
        rows = slice(start, start + 1 + len(words))
        conf, correct = probs[rows, col], predicted[rows] == col
        value, k = class_d_exposure(conf[0], bool(correct[0]), conf[1:], correct[1:])
        per_class[cls] = ClassDExposure(cls, word, value, float(conf[0]), labels[int(predicted[start])], k,
                                        len(words), float(np.log2(len(words) + 1)), chance_exposure(len(words) + 1))
    n = len(per_class)
    phrase = " ".join(tokens)
    return DExposure(sum(p.value for p in per_class.values()) / n, per_class,
                     sum(p.chance for p in per_class.values()) / n, sum(p.ceiling for p in per_class.values()) / n,
                     phrase)
