"""Utility of (defended) embeddings: a downstream task's accuracy (privacy-risks-language-model-embeddings App. A).

§VII measures each defence's cost as the accuracy of the benchmark system
built on the embeddings: a three-layer MLP with 200 sigmoid hidden units
over the embedding (App. A). The task here is the generated medical-style
corpus's department (10 classes, the paper's Medical pre-diagnosis task) or
the airline-style corpus's sentiment: stand-ins for the paper's data sets.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..stats import clopper_pearson
from .corpora import airline_corpus, medical_corpus
from .training import Standardiser, encode, mlp, predict, train_classifier

TASKS = {"medical": medical_corpus, "airline": airline_corpus}


@dataclass(frozen=True)
class Utility:
    """Downstream accuracy on ``n`` held-out texts, its interval and the majority-class chance."""

    task: str
    accuracy: float
    interval: tuple[float, float]
    chance: float
    n: int

    def __str__(self) -> str:
        return (f"{self.task} accuracy {self.accuracy:.3f} (95% CI {self.interval[0]:.3f}..{self.interval[1]:.3f}, "
                f"chance {self.chance:.3f})")


def measure_utility(encoder: Any, task: str = "medical", *, n_train: int = 2000, n_test: int = 1000,
                    steps: int = 1500, seed: int = 0) -> Utility:
    """Train the App. A benchmark classifier on ``encoder``'s embeddings of the task and return its test accuracy."""
    if task not in TASKS:
        raise ValueError(f"task={task!r} is not a utility task; fix: one of {sorted(TASKS)}")
    corpus = TASKS[task](n_train + n_test, np.random.default_rng([seed, 3]))
    z = encode(encoder, corpus.texts, what=f"the embeddings of the {task} utility task")
    scale = Standardiser(z[:n_train])
    x = scale(z)
    y = torch.as_tensor(corpus.labels, dtype=torch.long)
    classes = len(corpus.label_names)
    net = mlp(x.shape[1], (200,), classes, seed=seed)
    train_classifier(net, x[:n_train], y[:n_train], steps=steps, batch=64, seed=seed)
    guess = predict(net, x[n_train:], what="the utility classifier's outputs").argmax(dim=1)
    hits = int((guess == y[n_train:]).sum())
    chance = float(np.bincount(corpus.labels[:n_train], minlength=classes).max() / n_train)
    return Utility(task, hits / n_test, clopper_pearson(hits, n_test, 0.95), chance, n_test)
