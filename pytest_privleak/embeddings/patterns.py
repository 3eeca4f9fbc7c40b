"""Generators of the fixed-format texts of pattern reconstruction (privacy-risks-language-model-embeddings §V).

Assumption 3a (§V-A): the format of the plain text is public, so the attacker
generates as many labelled samples as it likes (§V-B 1). Two patterns:

* ``citizen-id`` (§V-A, "Citizen"): 18 digits = 6 residence code (one of
  3000 codes) | 8 birth date ``YYYYMMDD`` | 4 extra digits. The secret is the
  birth date, attacked as three sub-attacks: year (100 years, chance 0.01),
  month (12) and day (§V-B 2, divide and conquer).
* ``genome`` (§V-A, "Genome"): 20 nucleotides from ``ACGT``; the secret is
  the nucleotide at each position ``1..20`` (one sub-attack per position, one
  shared model, App. B).

Each generator is vectorised: ``sample(n, rng)`` draws ``n`` texts and their
labels as integer arrays, one per sub-attack (class indices).
"""
from __future__ import annotations

import calendar
from dataclasses import dataclass, field

import numpy as np

NUCLEOTIDES = "ACGT"


@dataclass(frozen=True)
class Sample:
    """``texts[i]`` and, per sub-attack, the class index ``labels[name][i]`` of its secret part."""

    texts: list[str]
    labels: dict[str, np.ndarray]


@dataclass(frozen=True)
class CitizenIdPattern:
    """Chinese citizen ID, 18 digits: residence (6) | birth date YYYYMMDD (8) | extra (4) (§V-A).

    Years are uniform over ``first_year .. first_year + 99`` (100 classes, the
    paper's year baseline 0.01), months uniform, days uniform over the valid
    days of the month (so the day's chance is the exact most-likely-day share,
    about 1/30 as in Table II). Residence codes: ``residences`` fixed random
    6-digit codes (3000 in §V-A), drawn from a generator seeded with ``seed``.
    """

    first_year: int = 1920
    residences: int = 3000
    seed: int = 20200518
    name: str = "citizen-id"
    sub_attacks: tuple[str, ...] = ("year", "month", "day")
    #: hidden units of the three-layer MLP of each sub-attack (§V-C, "Citizen": 400, 25, 200)
    hidden: dict = field(default_factory=lambda: {"year": (400,), "month": (25,), "day": (200,)})

    @property
    def classes(self) -> dict[str, list[str]]:
        return {"year": [str(self.first_year + i) for i in range(100)],
                "month": [f"{m:02d}" for m in range(1, 13)],
                "day": [f"{d:02d}" for d in range(1, 32)]}

    def class_probabilities(self) -> dict[str, np.ndarray]:
        """Exact prior of each sub-attack's classes under this generator (the chance baselines)."""
        day = np.zeros(31)
        for m in range(1, 13):
            n = self._days_in_month(m)
            day[:n] += 1.0 / (12 * n)
        return {"year": np.full(100, 0.01), "month": np.full(12, 1 / 12), "day": day}

    def _days_in_month(self, month: int) -> int:
        return calendar.monthrange(2001, month)[1]

    def _codes(self) -> np.ndarray:
        rng = np.random.default_rng(self.seed)
        return rng.choice(np.arange(100000, 1000000), size=self.residences, replace=False)

    def sample(self, n: int, rng: np.random.Generator) -> Sample:
        """``n`` IDs with their year / month / day class indices (day index 0 = the 1st)."""
        codes = self._codes()[rng.integers(0, self.residences, n)]
        year = rng.integers(0, 100, n)
        month = rng.integers(0, 12, n)
        days = np.array([self._days_in_month(m) for m in range(1, 13)])
        day = np.floor(rng.random(n) * days[month]).astype(np.int64)
        extra = rng.integers(0, 10000, n)
        texts = [f"{c:06d}{self.first_year + y:04d}{m + 1:02d}{d + 1:02d}{e:04d}"
                 for c, y, m, d, e in zip(codes.tolist(), year.tolist(), month.tolist(), day.tolist(), extra.tolist())]
        return Sample(texts, {"year": year, "month": month, "day": day})

    def describe_secret(self, labels: dict[str, int]) -> str:
        c = self.classes
        return f"{c['year'][labels['year']]}-{c['month'][labels['month']]}-{c['day'][labels['day']]}"


@dataclass(frozen=True)
class GenomePattern:
    """Genome sequences of ``length`` nucleotides (``ACGT``), 20 as in §V-C; secret: the nucleotide at each position.

    Nucleotides are drawn independently with ``probabilities`` (uniform by
    default; the chance baseline is the largest share, as in Fig. 3).
    ``separator`` joins nucleotides in the text ("" gives ``ACGT...`` as
    HS3D stores it).
    """

    length: int = 20
    probabilities: tuple[float, float, float, float] = (0.25, 0.25, 0.25, 0.25)
    separator: str = ""
    name: str = "genome"
    #: hidden units of the four-layer MLP on z ⊕ p_i (§V-C "Genome": 400, 100, with batch normalisation)
    hidden: dict = field(default_factory=lambda: {"nucleotide": (400, 100)})

    @property
    def sub_attacks(self) -> tuple[str, ...]:
        return tuple(f"position {i}" for i in range(1, self.length + 1))

    @property
    def classes(self) -> dict[str, list[str]]:
        return {s: list(NUCLEOTIDES) for s in self.sub_attacks}

    def class_probabilities(self) -> dict[str, np.ndarray]:
        p = np.asarray(self.probabilities, dtype=float)
        return {s: p / p.sum() for s in self.sub_attacks}

    def sample(self, n: int, rng: np.random.Generator) -> Sample:
        p = np.asarray(self.probabilities, dtype=float)
        codes = rng.choice(4, size=(n, self.length), p=p / p.sum())
        letters = np.array(list(NUCLEOTIDES))[codes]
        texts = [self.separator.join(row) for row in letters.tolist()]
        return Sample(texts, {s: codes[:, i] for i, s in enumerate(self.sub_attacks)})

    def describe_secret(self, labels: dict[str, int]) -> str:
        return "".join(NUCLEOTIDES[labels[s]] for s in self.sub_attacks)


PATTERNS = {"citizen-id": CitizenIdPattern, "genome": GenomePattern}


def get_pattern(pattern: object) -> CitizenIdPattern | GenomePattern:
    """A pattern object from its name (``"citizen-id"``, ``"genome"``) or the object itself."""
    if isinstance(pattern, (CitizenIdPattern, GenomePattern)):
        return pattern
    if isinstance(pattern, str) and pattern in PATTERNS:
        return PATTERNS[pattern]()
    raise ValueError(f"pattern={pattern!r} is not a known pattern; fix: use one of {sorted(PATTERNS)} (or a "
                     "CitizenIdPattern / GenomePattern object)")
