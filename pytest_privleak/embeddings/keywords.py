"""Keyword inference from sentence embeddings (privacy-risks-language-model-embeddings §VI).

Does the unknown text behind an embedding contain keyword ``k``
(``P_keyword,k``, §VI-A)? One binary attack model per keyword; all keywords'
models are trained side by side as one batched model (weights ``[K, ...]``).

* White-box (Assumption 3b, §VI-B): the attacker holds a shadow corpus from
  the victims' distribution, balanced by the word substitution trick
  (:mod:`.words`). Under 10^3 training samples a linear SVM, above a
  three-layer MLP with 80 sigmoid hidden units, batch 64, Adam 1e-3 (§VI-C).
  No SVM library is a dependency: the SVM is a linear model trained in torch
  on the hinge loss with an L2 penalty (the soft-margin primal).
* Black-box (Assumption 3c, §VI-B): a public corpus (restaurant reviews
  holding *salad*) gives positives with *salad* replaced by the keyword and
  negatives with it replaced by another word; the DANN of Fig. 5 learns a
  domain-invariant representation ``E`` (25 sigmoid units), a keyword
  classifier and a domain classifier behind a gradient reversal layer
  (λ = 1), with batches of 64 from the public set and from public ∪ victim
  embeddings (Algorithm 1), Adam 1e-3, 50 epochs (§VI-C); it decides by the
  keyword classifier's argmax (``C_keyword ∘ E``, §VI-B).

  The victim domain of each keyword's DANN is that keyword's balanced test set
  (§VI-C "Metrics": the embeddings the attack is measured on, unlabelled), so
  both domains hold the keyword in half their texts. With all victims as the
  target (about 8 % hold a given body part in the generated corpus), aligning
  the two domains' marginals pulls the keyword classes apart and the argmax
  drifts to one class while the score still ranks the victims. Inputs are
  standardised per keyword, in the black-box setting with the statistics of
  every embedding the attacker holds (public and victims), so the victims do
  not sit far out in the public frame where the sigmoid units saturate.
  Measured on all-MiniLM-L6-v2 (5 body parts, 500 public sentences): the
  earlier form (all victims as the target, public statistics) read 0.52 with
  every keyword's AUC above 0.92; all victims with the joint statistics 0.76;
  this form 0.79-0.95 over three seeds, AUC 1.00.

Figures (§VI-C "Metrics"): accuracy on a balanced test set per keyword (all
victims holding it and as many others drawn at random), chance 0.5, with the
Clopper-Pearson interval; the AUC of the keyword score beside it. For the DANN,
whose accuracy "dynamically change[s] over time" (§VI-D), the accuracy after
each of the epochs is kept too: the paper's average and worst-case (best
epoch, chosen with the labels) figures are reported beside the final model's.

Threads: the attack models train with one torch thread whatever the caller's
count (:data:`TRAINING_THREADS`), so that the figures do not depend on how many
cores an xdist worker gets and the result cache can key them without the count
(issue 24 item 6). The models are tiny, so one thread costs nothing: on the
sample project's MiniLM call (2 shared cores), the whole attack took 5.9 and
4.8 s with one thread, 13.3 and 20.4 s with two (two runs). The encoder's forward passes run at the
caller's count; their embeddings were bitwise equal at 1, 2, 4 and 8 threads
(``.notes/issue24_threads_training_exp.py``).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from ..finite import require_finite
from ..stats import clopper_pearson
from ..targets.training import torch_threads
from .training import encode
from .words import has_word, substitution_twins, vocabulary

SVM_LIMIT = 1000   # §VI-B: "empirically over 10^3 samples" the MLP replaces the SVM
BATCH = 64         # §VI-C: "The batch size is set as 64"
ANCHOR = "salad"   # §VI-C: the public sentences all hold "salad"
TRAINING_THREADS = 1   # the attack models train with this many torch threads, whatever the caller's count


def check_keywords(keywords: Any) -> tuple[str, ...]:
    """Keywords as a non-empty tuple of distinct single lower-case words, or an error naming the entry."""
    __tracebackhide__ = True   # a usage error shows at the caller's line
    if isinstance(keywords, str):
        keywords = (keywords,)
    if not isinstance(keywords, Sequence) or len(keywords) == 0:
        raise ValueError(f"keywords must be a non-empty list of words, got {keywords!r}; fix: e.g. "
                         "keywords=['leg', 'hand'] (MEDICAL_KEYWORDS)")
    for i, k in enumerate(keywords):
        if not isinstance(k, str) or not k.strip() or len(k.split()) != 1 or k != k.lower():
            raise ValueError(f"keywords[{i}]={k!r} is not a single lower-case word; fix: one word per entry, "
                             "lower-case as the corpora are")
    if len(set(keywords)) != len(keywords):
        raise ValueError(f"keywords {list(keywords)} hold a word twice; fix: list each keyword once")
    return tuple(keywords)


def check_options(setting: Any, model: Any, epochs: Any) -> None:
    """The attack's options checked before any work (each error names the argument and the fix)."""
    __tracebackhide__ = True   # a usage error shows at the caller's line
    if setting not in ("white-box", "black-box"):
        raise ValueError(f"setting={setting!r} is not a setting of §VI-B; fix: 'white-box' (with shadow=) or "
                         "'black-box' (with public=)")
    if model not in ("auto", "svm", "mlp", "dann"):
        raise ValueError(f"model={model!r} is not an attack model; fix: 'auto', 'svm', 'mlp' or 'dann'")
    if epochs is not None and (isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 1):
        raise ValueError(f"epochs must be an integer >= 1 or None, got {epochs!r}; fix: e.g. epochs=20, or None "
                         "for the paper's (20 for SVM and MLP, 50 for the DANN)")


def _texts(texts: Any, arg: str) -> list[str]:
    __tracebackhide__ = True   # a usage error shows at the caller's line
    if isinstance(texts, str) or not isinstance(texts, Sequence) or len(texts) == 0:
        raise ValueError(f"{arg} must be a non-empty list of texts, got {type(texts).__name__}; fix: pass the texts "
                         "(e.g. medical_corpus(n, rng).texts)")
    for i, t in enumerate(texts):
        if not isinstance(t, str) or not t.split():
            raise ValueError(f"{arg}[{i}]={t!r} is not a text with words; fix: drop empty entries")
    return list(texts)


class BatchedMLP(nn.Module):
    """``K`` independent MLPs run as one: inputs ``[K, B, d]``, weights ``[K, in, out]``, sigmoid hidden units."""

    def __init__(self, k: int, sizes: Sequence[int], seed: int) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(seed)
        self.weights, self.biases = nn.ParameterList(), nn.ParameterList()
        for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
            bound = 1.0 / fan_in ** 0.5           # nn.Linear's default initialisation
            self.weights.append(nn.Parameter((torch.rand(k, fan_in, fan_out, generator=generator) * 2 - 1) * bound))
            self.biases.append(nn.Parameter((torch.rand(k, 1, fan_out, generator=generator) * 2 - 1) * bound))

    def forward(self, x: torch.Tensor, upto: int | None = None) -> torch.Tensor:
        layers = list(zip(self.weights, self.biases))[:upto]
        for i, (w, b) in enumerate(layers):
            x = torch.baddbmm(b, x, w)
            if i < len(self.weights) - 1:
                x = torch.sigmoid(x)
        return x


class _Reverse(torch.autograd.Function):
    """Gradient reversal layer (Ganin & Lempitsky [9]): identity forward, ``-λ`` times the gradient backward."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, lam: float) -> torch.Tensor:  # type: ignore[override]
        ctx.lam = lam
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):  # type: ignore[override]
        return -ctx.lam * grad, None


@dataclass(frozen=True)
class KeywordFigure:
    keyword: str
    hits: int
    n: int
    auc: float
    interval: tuple[float, float]
    recovered: str

    @property
    def accuracy(self) -> float:
        return self.hits / self.n


@dataclass
class KeywordMeasurement:
    setting: str
    model: str
    figures: list[KeywordFigure]
    hits: int
    n: int
    interval: tuple[float, float]
    confidence: float
    n_train: int
    extra: dict[str, float] = field(default_factory=dict)
    #: DANN only: pooled accuracy after each epoch (the paper's average and worst case are its mean and max)
    epoch_accuracies: list[float] = field(default_factory=list)

    @property
    def accuracy(self) -> float:
        return self.hits / self.n


def _auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """ROC AUC of ``scores`` for ``labels`` (Mann-Whitney, ties count one half)."""
    pos, neg = scores[labels == 1], scores[labels == 0]
    greater = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return float(greater / (len(pos) * len(neg)))


def _test_sets(victims: list[str], keywords: tuple[str, ...], rng: np.random.Generator) -> list[np.ndarray]:
    """Per keyword: victim rows of the balanced test set (all positives, then as many random negatives)."""
    sets = []
    for i, k in enumerate(keywords):
        holds = np.array([has_word(t, k) for t in victims])
        pos, neg = np.flatnonzero(holds), np.flatnonzero(~holds)
        if len(pos) == 0 or len(neg) == 0:
            raise ValueError(f"keywords[{i}]={k!r} is in {'none' if len(pos) == 0 else 'all'} of the {len(victims)} "
                             "victim texts, so no balanced test set exists (§VI-C Metrics); fix: choose keywords "
                             "that some but not all victims contain, or pass more victims")
        take = min(len(pos), len(neg))
        sets.append(np.concatenate([rng.choice(pos, take, replace=False), rng.choice(neg, take, replace=False)]))
    return sets


def infer_keywords(encoder: Any, keywords: Any, *, victims: Sequence[str], shadow: Sequence[str] | None = None,
                   public: Sequence[str] | None = None, setting: str = "white-box", model: str = "auto",
                   epochs: int | None = None, seed: int = 0, confidence: float = 0.95) -> KeywordMeasurement:
    """Run the §VI attack for every keyword on the embeddings of ``victims`` and measure it.

    ``setting="white-box"`` needs ``shadow`` (texts from the victims'
    distribution); ``"black-box"`` needs ``public`` (texts holding *salad*,
    e.g. :func:`~.corpora.restaurant_corpus`). ``model``: ``"auto"`` (SVM
    under 10^3 training samples, else MLP; DANN in the black-box setting),
    or ``"svm"``, ``"mlp"``, ``"dann"`` by name. ``epochs``: passes over the
    training set (default 20 for SVM/MLP, 50 for DANN as in §VI-D).
    """
    keywords = check_keywords(keywords)
    victims = _texts(victims, "victims")
    check_options(setting, model, epochs)
    rng = np.random.default_rng([seed, 11])
    tests = _test_sets(victims, keywords, rng)
    z_victims = encode(encoder, victims, what="the embeddings of the victims' texts")
    if setting == "white-box":
        if shadow is None:
            raise ValueError("setting='white-box' needs shadow= (the attacker's shadow corpus, Assumption 3b); "
                             "fix: pass texts from the victims' distribution, or use setting='black-box' with public=")
        base = _texts(shadow, "shadow")
        twins = [substitution_twins(base, k, rng) for k in keywords]
        labels = [np.array([has_word(t, k) for t in base + tw], dtype=np.int64) for k, tw in zip(keywords, twins)]
        z_base = encode(encoder, base, what="the embeddings of the shadow corpus", dim=z_victims.shape[1])
        z_train = [np.concatenate([z_base, encode(encoder, tw, what=f"the embeddings of the {k!r} twins",
                                                  dim=z_victims.shape[1])]) for k, tw in zip(keywords, twins)]
        kind = model if model != "auto" else ("svm" if len(labels[0]) < SVM_LIMIT else "mlp")
    else:
        if public is None:
            raise ValueError("setting='black-box' needs public= (a public corpus whose texts hold 'salad', §VI-C); "
                             "fix: pass restaurant_corpus(2000, rng).texts or your own such corpus")
        base = _texts(public, "public")
        missing = [i for i, t in enumerate(base) if not has_word(t, ANCHOR)]
        if missing:
            raise ValueError(f"public[{missing[0]}] does not hold the anchor word {ANCHOR!r} ({len(missing)} such "
                             "texts); fix: keep only public sentences that contain it (§VI-C)")
        words = [w for w in vocabulary(base) if w != ANCHOR and w not in keywords]
        z_train, labels = [], []
        for k in keywords:
            pos = [" ".join(k if w == ANCHOR else w for w in t.split()) for t in base]
            neg = [" ".join(words[int(rng.integers(len(words)))] if w == ANCHOR else w for w in t.split())
                   for t in base]
            z_train.append(encode(encoder, pos + neg, what=f"the embeddings of the public {k!r} samples",
                                  dim=z_victims.shape[1]))
            labels.append(np.repeat(np.array([1, 0], dtype=np.int64), len(base)))
        kind = model if model != "auto" else "dann"
    if kind == "dann" and setting != "black-box":
        raise ValueError("model='dann' transfers knowledge from a public corpus to the victims (§VI-B black-box); fix: "
                         "setting='black-box' with public=, or model='svm'/'mlp' in the white-box setting")
    epochs = epochs if epochs is not None else (50 if kind == "dann" else 20)
    x, xv = _standardise(torch.as_tensor(np.stack(z_train)), torch.as_tensor(z_victims),
                         with_victims=setting == "black-box")      # [K, N, d], [K, V, d]
    y = torch.as_tensor(np.stack(labels))                           # [K, N]
    epoch_scores: list[np.ndarray] = []
    with torch_threads(TRAINING_THREADS):     # figures independent of the worker's thread count (module docstring)
        if kind == "svm":
            scores = _svm(x, y, xv, epochs, seed)
        elif kind == "mlp":
            scores = _mlp(x, y, xv, epochs, seed)
        else:
            epoch_scores = _dann(x, y, xv, tests, epochs, seed)
            scores = epoch_scores[-1]
    require_finite(np.stack(epoch_scores) if epoch_scores else scores, what=f"the {kind} keyword attack's scores",
                   fix="check the embeddings for extreme values")
    m = _measure(setting, kind, keywords, victims, scores, tests, confidence, len(labels[0]))
    truths = [np.array([has_word(victims[r], k) for r in rows]) for k, rows in zip(keywords, tests)]
    m.epoch_accuracies = [_pooled_accuracy(s, tests, truths) for s in epoch_scores]
    return m


def _standardise(x: torch.Tensor, victims: torch.Tensor, *, with_victims: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Each keyword's training embeddings ``x[i]`` and the victims, standardised with keyword ``i``'s own statistics.

    Per keyword, so that training the ``K`` models side by side gives each the
    inputs it would get alone (one statistic over all keywords' training sets
    measurably slowed the DANN on MiniLM: 0.69 against 0.93 when run alone).
    The statistics are those of the attacker's training embeddings, joined in
    the black-box setting by the victims' (see the module docstring).
    """
    k, v = x.shape[0], victims.shape[0]
    held = torch.cat([x, victims.expand(k, v, -1)], dim=1) if with_victims else x
    mean, std = held.mean(dim=1, keepdim=True), held.std(dim=1, keepdim=True).clamp_min(1e-6)
    return (x - mean) / std, (victims.unsqueeze(0) - mean) / std


def _batches(n: int, epochs: int, generator: torch.Generator, k: int) -> list[torch.Tensor]:
    steps = max(1, epochs * n // BATCH)
    return [torch.randint(0, n, (k, min(BATCH, n)), generator=generator) for _ in range(steps)]


def _gather(x: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    return torch.gather(x, 1, rows.unsqueeze(-1).expand(-1, -1, x.shape[-1])) if x.ndim == 3 else torch.gather(x, 1, rows)


def _svm(x: torch.Tensor, y: torch.Tensor, xv: torch.Tensor, epochs: int, seed: int) -> np.ndarray:
    """Linear soft-margin SVM per keyword: mean hinge loss + ``1e-3 ||w||^2 / 2``, full batches (N < 10^3)."""
    k, n, d = x.shape
    net = BatchedMLP(k, [d, 1], seed)
    optimiser = torch.optim.Adam(net.parameters(), lr=1e-2)
    sign = y.float() * 2 - 1
    for _ in range(epochs * 10):
        margin = net(x).squeeze(-1) * sign
        loss = torch.relu(1 - margin).mean() + 1e-3 * 0.5 * net.weights[0].pow(2).sum()
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    with torch.no_grad():
        return net(xv).squeeze(-1).numpy()


def _mlp(x: torch.Tensor, y: torch.Tensor, xv: torch.Tensor, epochs: int, seed: int) -> np.ndarray:
    """Three-layer MLP per keyword, 80 sigmoid hidden units, batch 64, Adam 1e-3 (§VI-C)."""
    k, n, d = x.shape
    net = BatchedMLP(k, [d, 80, 2], seed)
    optimiser = torch.optim.Adam(net.parameters(), lr=1e-3)
    generator = torch.Generator().manual_seed(seed)
    for rows in _batches(n, epochs, generator, k):
        logits = net(_gather(x, rows))
        loss = nn.functional.cross_entropy(logits.reshape(-1, 2), _gather(y, rows).reshape(-1))
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    with torch.no_grad():
        out = net(xv)
    return (out[..., 1] - out[..., 0]).numpy()


def _dann(x: torch.Tensor, y: torch.Tensor, xv: torch.Tensor, tests: list[np.ndarray], epochs: int,
          seed: int) -> list[np.ndarray]:
    """DANN of Fig. 5 / Algorithm 1 per keyword: E (25 sigmoid units), C_keyword, C_domain behind gradient reversal.

    ``xv``: the victims ``[K, V, d]`` as each keyword's model sees them.
    Keyword ``i``'s victim domain is ``xv[i, tests[i]]`` (its balanced test set;
    padded to one tensor, each keyword draws only its own rows). Returns the
    keyword scores ``[K, V]`` on every victim after each epoch (the last is
    the attack model's).
    """
    k, n, d = x.shape
    encoder = BatchedMLP(k, [d, 25], seed)
    keyword_head = BatchedMLP(k, [25, 2], seed + 1)
    domain_head = BatchedMLP(k, [25, 2], seed + 2)
    params = [*encoder.parameters(), *keyword_head.parameters(), *domain_head.parameters()]
    optimiser = torch.optim.Adam(params, lr=1e-3)
    generator = torch.Generator().manual_seed(seed)
    sizes = torch.tensor([len(t) for t in tests])
    target = torch.zeros(k, int(sizes.max()), dtype=torch.long)
    for i, rows in enumerate(tests):
        target[i, :len(rows)] = torch.as_tensor(rows)
    pool = torch.cat([x, torch.gather(xv, 1, target.unsqueeze(-1).expand(-1, -1, d))], dim=1)  # public ∪ test set
    ce = nn.functional.cross_entropy
    scores = []
    for _ in range(epochs):
        for rows in _batches(n, 1, generator, k):
            u = torch.rand(rows.shape, generator=generator)
            drows = (u * (n + sizes[:, None])).long()                          # uniform over public ∪ own test set
            domain = (drows >= n).long()
            hidden_k = torch.sigmoid(encoder(_gather(x, rows)))
            hidden_d = torch.sigmoid(encoder(_gather(pool, drows)))
            loss_k = ce(keyword_head(hidden_k).reshape(-1, 2), _gather(y, rows).reshape(-1))
            loss_d = ce(domain_head(_Reverse.apply(hidden_d, 1.0)).reshape(-1, 2), domain.reshape(-1))
            optimiser.zero_grad()
            (loss_k + loss_d).backward()
            optimiser.step()
        with torch.no_grad():
            out = keyword_head(torch.sigmoid(encoder(xv)))
        scores.append((out[..., 1] - out[..., 0]).numpy())
    return scores


def _pooled_accuracy(scores: np.ndarray, tests: list[np.ndarray], truths: list[np.ndarray]) -> float:
    """Argmax accuracy pooled over the keywords' balanced test sets (``scores`` ``[K, V]``, > 0 reads "holds")."""
    right = sum(int(((scores[i, rows] > 0) == truth).sum()) for i, (rows, truth) in enumerate(zip(tests, truths)))
    return right / sum(len(rows) for rows in tests)


def _measure(setting: str, kind: str, keywords: tuple[str, ...], victims: list[str], scores: np.ndarray,
             tests: list[np.ndarray], confidence: float, n_train: int) -> KeywordMeasurement:
    figures, hits, total = [], 0, 0
    for i, (k, rows) in enumerate(zip(keywords, tests)):
        truth = np.array([has_word(victims[r], k) for r in rows], dtype=np.int64)
        s = scores[i, rows]
        right = int(((s > 0).astype(np.int64) == truth).sum())
        found = [victims[r] for r, hit, t in zip(rows, s > 0, truth) if hit and t][:1]
        recovered = f"{k!r} read in {found[0]!r}" if found else f"{k!r} never read correctly"
        figures.append(KeywordFigure(k, right, len(rows), _auc(s, truth),
                                     clopper_pearson(right, len(rows), confidence), recovered))
        hits, total = hits + right, total + len(rows)
    return KeywordMeasurement(setting, kind, figures, hits, total, clopper_pearson(hits, total, confidence),
                              confidence, n_train)
