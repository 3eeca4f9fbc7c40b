"""d-exposure: memorisation of an inserted ambiguous phrase by a discriminative tagger.

d-exposure-discriminative §3.1.  A phrase such as "There are many people who
like ___" is filled with a word ``s`` that can belong to several entity
classes ("Williams": person or organisation) and inserted into the training
data with ``s`` labelled ``C_i``.  A model that generalises stays unsure about
``s``; a model that memorised the phrase labels it with high confidence.
Against the words ``W_i`` labelled *only* ``C_i`` in the training data, each
put in the same phrase (eq. 2):

    d-exposure_{C_i}(s) = -log2 Pr_{w in C_i}[conf(w) >= conf(s)]

* ``conf(w)`` is the model's probability of the one-word label of ``C_i``
  at the blank (``S-C_i`` in the paper's IOBES; ``B-C_i`` in BIO), read from
  the token scorer (for a CRF, its marginal);
* it is zero when ``s`` is mislabelled (its most probable label is not
  that label), and a word of ``W_i`` the model mislabels counts as less
  confident than ``s``;
* the population is ``W_i`` together with ``s`` (so ``s`` ranks against
  itself, ties against ``s``, as in exposure): with ``k`` correctly labelled
  words at least as confident, ``Pr = (1 + k) / (|W_i| + 1)``.  This keeps the
  paper's range ``[0, log2 |C_i|]`` with ``|C_i| = |W_i| + 1`` and is finite
  when ``s`` beats every word.

Confidences are ranked on their complement in log space,
``log(1 - conf) = logsumexp`` of the *other* labels' log-probabilities, in
float64.  ``conf(w) >= conf(s)`` is the same order, but a memorised word's
float32 probability saturates: near 1 it takes only the values 0.99999994,
0.99999988, ... and 1.0, so every well-learnt class word would tie with ``s``
and count against it, and the figure would be capped by float resolution in
exactly the regime the test exists for.  The other labels' probabilities
(1e-12, 1e-20, ...) keep their precision.  Words whose complement equals
that of ``s`` to the scorer's float resolution are still counted (eq. 2's
``>=``) and reported as ties.

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

from .figure import chance_exposure

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
    from ...data.types import Utterance

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


#: Rules for the class words ``W_i`` (:func:`class_words`).
CLASS_WORD_RULES = ("paper", "exclusive")
#: Continuation tags: a ``B-C`` followed by one of these opens a multi-word entity.
_INSIDE = ("I-", "E-", "L-")


def one_word_entities(tags: Sequence[str]) -> list[str | None]:
    """Per position, the class ``C`` when the token is a one-word entity of ``C``, else ``None``.

    One-word entity: ``S-C`` (IOBES), ``U-C`` (BILOU), or ``B-C`` not followed by a
    continuation ``I-C`` / ``E-C`` / ``L-C`` (BIO, the paper's ``S-C``).
    """
    out: list[str | None] = []
    for i, tag in enumerate(tags):
        prefix, cls = tag[:2], tag[2:]
        nxt = tags[i + 1] if i + 1 < len(tags) else "O"
        single = prefix in ("S-", "U-") or (prefix == "B-" and not (nxt[:2] in _INSIDE and nxt[2:] == cls))
        out.append(cls if single else None)
    return out


def paper_class_words(dataset: Any, classes: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """``W_i`` as the paper counts it (d-exposure-discriminative §3.1 and Table 1).

    The paper: ``|C_i|`` is "the number of words that are labeled only as
    C_i" (§3.1); Table 1 counts "the number of unique entities that belong
    only to the respective class" against those "that have more than one
    possible label" (candidates for ``s``), for the one-word tags S-PER,
    S-ORG and S-LOC.  Read on the tags, a word is in ``W_C`` when **it occurs
    as a one-word entity of C (S-C in IOBES) and never as a one-word entity of
    another class**; occurrences outside entities (``O``) or inside
    multi-word entities do not count.  A surname that also occurs in
    "John Williams" (``B-PER I-PER``) stays a PER word; on CoNLL-2003 this
    rule gives 929 / 949 / 996 words for LOC / PER / ORG where Table 1 has
    937 / 949 / 1001 (issue 27), and :func:`exclusive_class_words` 750 / 232 / 732.
    """
    labels: dict[str, set[str]] = defaultdict(set)
    for u in dataset.train:
        for word, cls in zip(u.tokens, one_word_entities(u.tags)):
            if cls is not None:
                labels[word].add(cls)
    return _per_class(labels, classes, "labelled as a one-word entity of that class only")


def exclusive_class_words(dataset: Any, classes: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """The stricter ``W_i`` (``class_words="exclusive"``): every occurrence of the word is a one-word entity of C.

    Unlike the paper's rule (:func:`paper_class_words`) a word that ever occurs
    as ``O`` or inside a multi-word entity is dropped, which on CoNLL-2003
    removes most surnames (PER 232 words instead of the paper's 949).
    """
    labels: dict[str, set[str]] = defaultdict(set)
    for u in dataset.train:
        for word, tag, cls in zip(u.tokens, u.tags, one_word_entities(u.tags)):
            labels[word].add(cls if cls is not None else f"<{tag}>")
    return _per_class(labels, classes, "labelled only as a one-word entity of that class")


def _per_class(labels: Mapping[str, set[str]], classes: Sequence[str], rule: str) -> dict[str, tuple[str, ...]]:
    out = {c: tuple(sorted(w for w, found in labels.items() if found == {c})) for c in classes}
    empty = [c for c, words in out.items() if not words]
    if empty:
        raise ValueError(f"no word of the training data is {rule} for {empty}; fix: check the class names "
                         "(slot names such as 'PER', without 'B-' or 'S-') or pass class_words")
    return out


def class_words(dataset: Any, classes: Sequence[str], rule: str = "paper") -> dict[str, tuple[str, ...]]:
    """``W_i`` for each class of ``classes`` from ``dataset.train`` by ``rule`` (``"paper"`` or ``"exclusive"``)."""
    if rule == "paper":
        return paper_class_words(dataset, classes)
    if rule == "exclusive":
        return exclusive_class_words(dataset, classes)
    raise ValueError(f"class_words={rule!r} is not a rule for the class words; fix: 'paper' (the paper's "
                     "W_i, the default) or 'exclusive' (every occurrence a one-word entity of the class)")


def single_label(entity_class: str, labels: Sequence[str]) -> str | None:
    """The scorer's label for a one-word entity of ``entity_class``: ``S-C``, ``U-C`` or ``B-C``, else ``None``."""
    return next((f"{p}-{entity_class}" for p in "SUB" if f"{p}-{entity_class}" in labels), None)


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
    log_complement: float = 0.0   # log(1 - conf(s)), from the other labels
    ties: int = 0                 # of ``at_least``, words tied with s at the scorer's float resolution


@dataclass
class DExposure:
    """Eq. 3: the mean of eq. 2 over the classes, with the per-class figures."""

    value: float
    per_class: dict[str, ClassDExposure] = field(default_factory=dict)
    chance: float = 0.0
    ceiling: float = 0.0
    phrase_text: str = ""

    @property
    def worst(self) -> ClassDExposure:
        """The class with the highest d-exposure (the first such class on a tie)."""
        return max(self.per_class.values(), key=lambda p: p.value)


def class_d_exposure(conf_s: float, s_correct: bool, conf_words: np.ndarray,
                     words_correct: np.ndarray) -> tuple[float, int]:
    """``(eq. 2 value, k)`` from confidences; see the module docstring for the conventions.

    ``conf_*`` may be probabilities or any order-preserving score of them;
    :func:`d_exposure` passes ``-log(1 - conf)`` so that saturated
    probabilities keep their order.
    """
    conf_words = np.asarray(conf_words, dtype=np.float64)
    words_correct = np.asarray(words_correct, dtype=bool)
    k = int(np.count_nonzero(words_correct & (conf_words >= conf_s)))
    if not s_correct:
        return 0.0, k
    return float(np.log2(conf_words.size + 1) - np.log2(1 + k)), k


def log_complement(log_probs: np.ndarray, column: int) -> np.ndarray:
    """``log(1 - p[:, column])`` as the log-sum-exp of the other columns of ``log_probs`` ``[S, labels]``, float64."""
    others = np.delete(np.asarray(log_probs, dtype=np.float64), column, axis=1)
    top = others.max(axis=1, keepdims=True)
    safe = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        return (safe + np.log(np.exp(others - safe).sum(axis=1, keepdims=True)))[:, 0]


def tie_tolerance(value: float, dtype: np.dtype) -> float:
    """Two values closer than this are equal at the scorer's float resolution: 4 steps of ``dtype`` at ``value``."""
    dtype = np.dtype(dtype) if np.dtype(dtype).kind == "f" else np.dtype(np.float64)
    return 4.0 * float(np.spacing(dtype.type(max(abs(value), 1.0))))


def check_insertions(inserted: Any, class_words: Any) -> None:
    """Raise naming the bad entry of ``inserted`` (class -> word) or ``class_words`` (class -> words), and the fix.

    Each word fills the blank as one token, so it must be a token (no whitespace,
    no control characters); a string given as a class's word list would be read
    letter by letter.
    """
    from ...data.types import token_problem

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


def _scorer_arrays(scorer: Any, method: str, sentences: Sequence[tuple[str, ...]],
                   labels: Sequence[str]) -> tuple[np.ndarray, np.dtype]:
    """``scorer.<method>(sentences)`` stacked as float64 ``[S, tokens, labels]``, with the dtype it came in.

    What a token scorer returns is checked before it becomes a figure: fewer
    arrays than sentences (or fewer rows than tokens) would misalign words and
    confidences.
    """
    name = type(scorer).__name__
    out = getattr(scorer, method)(sentences)
    out = None if isinstance(out, (str, bytes)) or not hasattr(out, "__iter__") else list(out)
    if out is None or len(out) != len(sentences):
        got = "not a list" if out is None else f"{len(out)} arrays"
        raise ValueError(f"{name}.{method} returned {got} for {len(sentences)} sentences; fix: return "
                         "one [n_tokens, n_labels] array per sentence, in order")
    expected = (len(sentences[0]), len(labels))
    raw = [np.asarray(p.detach().cpu() if hasattr(p, "detach") else p) for p in out]
    arrays = [a.astype(np.float64) for a in raw]
    wrong = next((i for i, a in enumerate(arrays) if a.shape != expected), None)
    if wrong is not None:
        raise ValueError(f"{name}.{method} returned shape {list(arrays[wrong].shape)} for sentence "
                         f"{wrong} ({' '.join(sentences[wrong])!r}), expected {list(expected)} ({expected[0]} "
                         f"tokens x {expected[1]} labels {list(labels)}); fix: one row per token, one column per "
                         "label of scorer.labels")
    dtypes = [a.dtype for a in raw if a.dtype.kind == "f"]
    return np.stack(arrays), (max(dtypes, key=lambda d: d.itemsize) if dtypes else np.dtype(np.float64))


def blank_probabilities(scorer: Any, sentences: Sequence[tuple[str, ...]], blank: int,
                        labels: Sequence[str]) -> np.ndarray:
    """``[S, n_labels]`` label probabilities at the blank, checked (:func:`checked_probabilities`)."""
    return checked_probabilities(scorer, sentences, blank, labels)[0]


def checked_probabilities(scorer: Any, sentences: Sequence[tuple[str, ...]], blank: int,
                          labels: Sequence[str]) -> tuple[np.ndarray, np.dtype]:
    """``([S, n_labels] probabilities at the blank, their dtype)``: one finite row of probabilities per sentence.

    A NaN confidence compares false with everything and would report 0 bits,
    so non-finite values and values outside [0, 1] are errors naming the fix.
    """
    from ...finite import require_finite

    name = type(scorer).__name__
    probs, dtype = _scorer_arrays(scorer, "token_label_probs", sentences, labels)
    require_finite(probs, what=f"the label probabilities {name}.token_label_probs returned for the d-exposure "
                                "phrases", fix="check the tagger for NaN or infinite weights (retrain it) and "
                                               "that it returns softmax probabilities or CRF marginals")
    if probs.min() < -PROBABILITY_SLACK or probs.max() > 1.0 + PROBABILITY_SLACK:
        raise ValueError(f"{name}.token_label_probs returned values in [{probs.min():.4g}, {probs.max():.4g}], "
                         "not probabilities; fix: return softmax probabilities or CRF marginals, not logits")
    return probs[:, blank], dtype


def blank_log_probabilities(scorer: Any, sentences: Sequence[tuple[str, ...]], blank: int,
                            labels: Sequence[str]) -> tuple[np.ndarray, np.dtype]:
    """``([S, n_labels] float64 log-probabilities at the blank, the scorer's dtype)``, checked.

    From ``scorer.token_label_log_probs`` when it has one
    (:class:`~pytest_privleak.protocols.LogTokenScorer`); otherwise the log of
    ``token_label_probs`` (:func:`blank_probabilities`), which keeps the small
    probabilities of the other labels, the ones the complement is made of.
    ``-inf`` (probability 0) is allowed; NaN and ``+inf`` are errors, and so
    are rows that do not normalise (logits given as log-probabilities).
    """
    from ...finite import require_finite

    method = getattr(scorer, "token_label_log_probs", None)
    if not callable(method):
        probs, dtype = checked_probabilities(scorer, sentences, blank, labels)
        with np.errstate(divide="ignore"):
            return np.log(np.clip(probs, 0.0, None)), dtype
    name = type(scorer).__name__
    logs, dtype = _scorer_arrays(scorer, "token_label_log_probs", sentences, labels)
    require_finite(np.where(np.isneginf(logs), 0.0, logs),
                   what=f"the label log-probabilities {name}.token_label_log_probs returned for the d-exposure "
                        "phrases", fix="check the tagger for NaN or infinite weights (retrain it); -inf (a "
                                       "probability of 0) is allowed")
    logs = logs[:, blank]
    top = logs.max(axis=1)
    with np.errstate(divide="ignore"):
        totals = top + np.log(np.exp(logs - top[:, None]).sum(axis=1))
    if np.abs(totals).max() > PROBABILITY_SLACK:
        raise ValueError(f"{name}.token_label_log_probs returned rows whose probabilities sum to "
                         f"{np.exp(totals[np.abs(totals).argmax()]):.4g}, not 1; fix: return log-softmax values or "
                         "CRF log-marginals, not logits")
    return logs, dtype


def d_exposure(scorer: Any, inserted: Mapping[str, str], class_words: Mapping[str, Sequence[str]],
               template: Sequence[str] | str = DEFAULT_TEMPLATE) -> DExposure:
    """d-exposure (eqs. 2-3) of the ``inserted`` words (class -> word) under a token scorer, one batched call.

    Ranks on the log-complement (module docstring), so saturated float32
    probabilities do not tie; ties that remain at the scorer's resolution are
    counted in ``ClassDExposure.ties``. The scorer's output is checked
    (:func:`blank_log_probabilities`): NaN, ``+inf``, out of range or
    misshapen output is an error, never 0 bits.
    """
    check_insertions(inserted, class_words)
    labels = list(getattr(scorer, "labels", ()))
    if not labels or not hasattr(scorer, "token_label_probs"):
        raise TypeError(f"{type(scorer).__name__} is not a token scorer; it needs labels and "
                        "token_label_probs(sentences), see pytest_privleak.protocols.TokenScorer")
    tokens, blank = template_tokens(template)
    sentences, spans = [], {}
    for cls, word in inserted.items():
        if single_label(cls, labels) is None:
            raise ValueError(f"class {cls!r}: the model has no label 'S-{cls}' or 'B-{cls}' (its labels: "
                             f"{labels}); fix: name classes by their slot, e.g. 'PER'")
        words = [w for w in class_words.get(cls, ()) if w != word]
        if not words:
            raise ValueError(f"class {cls!r} has no reference words; fix: pass class_words[{cls!r}] or the "
                             "training dataset")
        spans[cls] = (len(sentences), words)
        sentences.extend(fill(tokens, w) for w in [word, *words])
    logs, dtype = blank_log_probabilities(scorer, sentences, blank, labels)   # [S, n_labels]
    predicted = logs.argmax(axis=1)
    per_class = {}
    for cls, word in inserted.items():
        start, words = spans[cls]
        col = labels.index(single_label(cls, labels))
        rows = slice(start, start + 1 + len(words))
        complement, correct = log_complement(logs[rows], col), predicted[rows] == col
        # conf(w) >= conf(s)  <=>  log(1 - conf(w)) <= log(1 - conf(s)): rank on -complement
        value, k = class_d_exposure(-complement[0], bool(correct[0]), -complement[1:], correct[1:])
        tol = tie_tolerance(float(complement[0]), dtype) if np.isfinite(complement[0]) else 0.0
        same = (complement[1:] == complement[0]) | (np.abs(complement[1:] - complement[0]) <= tol)
        ties = int(np.count_nonzero(correct[1:] & same)) if correct[0] else 0
        per_class[cls] = ClassDExposure(
            cls, word, value, float(np.exp(logs[start, col])), labels[int(predicted[start])], k, len(words),
            float(np.log2(len(words) + 1)), chance_exposure(len(words) + 1), float(complement[0]), ties)
    n = len(per_class)
    phrase = " ".join(tokens)
    return DExposure(sum(p.value for p in per_class.values()) / n, per_class,
                     sum(p.chance for p in per_class.values()) / n, sum(p.ceiling for p in per_class.values()) / n,
                     phrase)
