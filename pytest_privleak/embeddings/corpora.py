"""Generated stand-ins for the corpora of privacy-risks-language-model-embeddings §VI-C.

The paper uses CMS medical procedure descriptions (Medical: 10 departments,
body-part keywords such as *leg*, *hand*, *spine*, Table VIII), Skytrax airline
reviews (Airline: city-name keywords) and Yelp-Food restaurant reviews holding
*salad* as the black-box attacker's public corpus. None of them ships here;
these generators write sentences of the same shape from small word lists, so
the attacks and defences can run anywhere. They are STAND-INS: figures on them
are not the paper's figures on the real data.

Each corpus is a list of lower-case, space-separated texts with a task label
(Medical: the department, the paper's utility task, App. A; Airline: the
review's sentiment), used to measure the utility a defence keeps.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: §VI-C / Table VIII: body-related keywords of the Medical case
MEDICAL_KEYWORDS = ("leg", "hand", "spine", "chest", "ankle", "head", "hip", "arm", "face", "shoulder")
#: §VI-C / Table VIII: city names of the Airline case (one-word names here)
AIRLINE_KEYWORDS = ("london", "toronto", "paris", "rome", "sydney", "dubai", "bangkok", "singapore", "frankfurt",
                    "tokyo")

_DEPARTMENTS = {
    "orthopedic surgery": ["repair of fracture", "fixation of broken bone", "replacement of joint",
                           "manipulation of dislocated joint"],
    "dermatology": ["removal of skin tags", "destruction of malignant growth", "biopsy of skin growth",
                    "application of ultraviolet light"],
    "radiology": ["ct scan", "mri scan", "x ray exam", "ultrasound exam"],
    "anesthesiology": ["anesthesia for procedure", "nerve block injection", "sedation for surgery",
                       "epidural injection"],
    "cardiology": ["insertion of catheter in artery", "imaging of heart vessels", "repair of venous valve",
                   "stress test of heart"],
    "physical therapy": ["therapeutic exercise", "manual therapy", "gait training", "massage therapy"],
    "neurology": ["nerve conduction study", "muscle test with needle", "brain wave recording", "reflex test"],
    "emergency medicine": ["emergency visit for injury", "urgent care of wound", "treatment of burn",
                           "closure of laceration"],
    "general surgery": ["excision of cyst", "drainage of abscess", "removal of lesion", "repair of hernia"],
    "pathology": ["tissue exam under microscope", "lab test of fluid", "analysis of biopsy sample",
                  "culture of specimen"],
}
_MEDICAL_TAILS = ["", "with contrast", "without contrast", "one centimeter or less", "each additional area",
                  "with imaging guidance", "in office", "first fifteen minutes", "on both sides", "under local anesthesia"]

_AIRLINE_GOOD = ["great", "friendly", "comfortable", "excellent", "smooth", "pleasant", "clean", "helpful"]
_AIRLINE_BAD = ["terrible", "rude", "cramped", "awful", "delayed", "dirty", "noisy", "unhelpful"]
_AIRLINE_NOUNS = ["flight", "crew", "seat", "meal", "service", "check in", "boarding", "lounge", "cabin", "staff"]
_AIRLINE_FRAMES = ["my {noun} from {a} to {b} was {adj}", "the {noun} on the way to {b} was {adj}",
                   "flew {a} to {b} and the {noun} was {adj}", "{adj} {noun} on our trip from {a}",
                   "the {noun} was {adj} all the way to {b}"]

_DISHES = ["salad", "pasta", "soup", "burger", "pizza", "steak", "sandwich", "tacos", "curry", "noodles"]
_FOOD_ADJ = ["fresh", "tasty", "bland", "crisp", "soggy", "delicious", "salty", "cold", "huge", "cheap"]
_FOOD_FRAMES = ["the {dish} was {adj} and the waiter was nice", "i ordered the {dish} and it was {adj}",
                "their {dish} is {adj} but the place is loud", "we shared a {adj} {dish} with friends",
                "best {dish} in town , {adj} every time"]


@dataclass(frozen=True)
class Corpus:
    """``texts[i]`` with its task class ``labels[i]`` (index into ``label_names``)."""

    texts: list[str]
    labels: np.ndarray
    label_names: tuple[str, ...]


def medical_corpus(n: int, rng: np.random.Generator, *, site_share: float = 0.8) -> Corpus:
    """Medical-style procedure descriptions (stand-in for CMS records), labelled with their department.

    ``"<procedure> of the <site> <tail>"``: a site keyword appears in a share
    ``site_share`` of the texts, drawn independently of the department.
    """
    names = tuple(_DEPARTMENTS)
    dept = rng.integers(0, len(names), n)
    proc = rng.integers(0, 4, n)
    site = rng.integers(0, len(MEDICAL_KEYWORDS), n)
    has_site = rng.random(n) < site_share
    tail = rng.integers(0, len(_MEDICAL_TAILS), n)
    texts = []
    for d, p, s, h, t in zip(dept.tolist(), proc.tolist(), site.tolist(), has_site.tolist(), tail.tolist()):
        words = [_DEPARTMENTS[names[d]][p]] + ([f"of the {MEDICAL_KEYWORDS[s]}"] if h else []) + [_MEDICAL_TAILS[t]]
        texts.append(" ".join(w for w in words if w))
    return Corpus(texts, dept, names)


def airline_corpus(n: int, rng: np.random.Generator) -> Corpus:
    """Airline-review-style sentences (stand-in for Skytrax) naming one or two cities, labelled with sentiment."""
    good = rng.random(n) < 0.5
    frame = rng.integers(0, len(_AIRLINE_FRAMES), n)
    noun = rng.integers(0, len(_AIRLINE_NOUNS), n)
    adj = rng.integers(0, len(_AIRLINE_GOOD), n)
    cities = rng.integers(0, len(AIRLINE_KEYWORDS), (n, 2))
    texts = []
    for g, f, o, a, (c1, c2) in zip(good.tolist(), frame.tolist(), noun.tolist(), adj.tolist(), cities.tolist()):
        word = (_AIRLINE_GOOD if g else _AIRLINE_BAD)[a]
        texts.append(_AIRLINE_FRAMES[f].format(noun=_AIRLINE_NOUNS[o], a=AIRLINE_KEYWORDS[c1], b=AIRLINE_KEYWORDS[c2],
                                               adj=word))
    return Corpus(texts, good.astype(np.int64), ("negative", "positive"))


def restaurant_corpus(n: int, rng: np.random.Generator) -> Corpus:
    """Restaurant-review-style sentences holding *salad* (stand-in for the Yelp-Food public corpus, §VI-C)."""
    frame = rng.integers(0, len(_FOOD_FRAMES), n)
    adj = rng.integers(0, len(_FOOD_ADJ), n)
    texts = [_FOOD_FRAMES[f].format(dish="salad", adj=_FOOD_ADJ[a]) for f, a in zip(frame.tolist(), adj.tolist())]
    return Corpus(texts, np.zeros(n, dtype=np.int64), ("review",))


def corpus_vocabulary() -> list[str]:
    """Every word the generators can write (for building a test tokenizer)."""
    words: set[str] = set(MEDICAL_KEYWORDS) | set(AIRLINE_KEYWORDS) | set(_DISHES) | set(_FOOD_ADJ)
    phrases = [p for ps in _DEPARTMENTS.values() for p in ps] + _MEDICAL_TAILS + _AIRLINE_GOOD + _AIRLINE_BAD
    phrases += _AIRLINE_NOUNS + _AIRLINE_FRAMES + _FOOD_FRAMES + ["of the"]
    for p in phrases:
        words |= {w for w in p.replace("{", " ").replace("}", " ").split() if w not in {"noun", "a", "b", "adj", "dish"}}
    words |= {"a", "b"}
    return sorted(words)
