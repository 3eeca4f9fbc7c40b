"""The Mix And Match attack (mix-and-match-text-classifiers §4.3) and its exhaustive baseline (§5.1.4).

Threat model (§4.1): white-box access to a classifier fine-tuned from a
pretrained masked LM, and to that LM. For a canary whose target token is
masked:

1. Candidate generation (§4.3.1): the *Frankenstein model* is the fine-tuned
   encoder with the base LM's original generation head re-attached
   (:func:`frankenstein`, not fine-tuned further). Its logits at the masked
   position sort the whole vocabulary.
2. Candidate pruning (§4.3.2): word-piece continuations ("##ing"), special
   tokens and punctuation are filtered out; each remaining candidate is put
   in the masked position and the classifier's cross-entropy on the canary's
   label is computed (the loss-based membership attack of Yeom et al., [8]);
   the candidate with the lowest loss is the likeliest secret.

The baseline of Elmahdy et al. ([7], §5.1.4) scores every filtered
vocabulary token with the classifier's cross-entropy (exhaustive search).

Figures (§5.1.5): the *candidates needed* ("Top K"): the true token's rank in
the Frankenstein model's filtered list, i.e. how many candidates Mix And
Match must prune to include it, against the vocabulary size the exhaustive
search prunes; and the *rank* ("Beam size") of the true token after sorting
by cross-entropy. Ranks are mid-ranks: ``1 + #lower + #tied / 2`` (the
expected rank when ties are broken at random), and the tie range
``[1 + #lower, 1 + #lower + #tied]`` is reported as the rank's interval.

Exposure (Carlini et al. 2019, [5], issue 9 item 4) from the rank:
``log2 |V| - log2 rank`` with the Secret Sharer's rank, ties counted against
the secret (``1 + #lower + #tied``, as :mod:`.exposure` counts them), so a
classifier whose loss ignores the token shows 0 bits. The exhaustive search
gives the exact figure; Mix And Match ranks the secret among the candidates it
pruned only, a rank no worse than the exact one, so its exposure is an upper
bound (the gate errs towards failing), and a secret not among them gets the
most it could have, ``log2 |V| - log2 (pruned + 1)``.
:func:`..exposure.mask_canary.mask_canary_exposure` returns it as an :class:`..exposure.figure.Exposure`, so
that ``assert_exposure_below(model, mask_canary, max_bits)`` gates it.

Without a masked LM (a classifier fine-tuned from an encoder that ships no
MLM head, such as all-MiniLM-L6-v2), the exhaustive search still runs: it
needs only the classifier. Mix And Match cannot (its candidates come from a
masked-LM head), so its "candidates needed" figure is not computed and
:data:`NO_GENERATOR` says why.

Everything is batched: one Frankenstein forward per canary, and the
candidate fills as ``[N, L]`` id tensors through the classifier in chunks.

Threads: the attack only scores (forward passes, no training), so its figures
do not depend on torch's thread count: on the sample project's tiny-BERT
classifier the ranks of a said and a never-said canary were bitwise equal at
1, 2, 4 and 8 threads (``.notes/issue24_threads_training_exp.py``), and the
result cache keys them without the count (issue 24 item 6). The optional head
re-fit (:func:`refit_head`) trains, with one thread by default.
"""
from __future__ import annotations

import math
import string
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.nn import functional as F

from ...finite import require_finite
from ...adapters.frankenstein import frankenstein
from .canaries import MaskCanary, as_mask_canaries

METHODS = ("auto", "exhaustive", "mix-and-match")
#: Where candidates come from (§4.3.1): the Frankenstein model, or the pretrained LM itself ("we can directly
#: utilize the pre-trained language model to generate candidates"; §5.2 compares both).
GENERATORS = ("frankenstein", "base")
#: Candidates the default attack may score with the classifier per canary: a vocabulary this size or smaller
#: is searched exhaustively (exact rank); above it, Mix And Match prunes the Frankenstein's top candidates.
DEFAULT_BUDGET = 50_000
DEFAULT_BATCH = 512
#: What each attack is, in the messages.
ATTACK_NAMES = {"exhaustive": "exhaustive search: classifier cross-entropy of every vocabulary token (§5.1.4)",
                "mix-and-match": "Mix And Match: Frankenstein-model candidates pruned by classifier cross-entropy "
                                 "(§4.3)"}
#: Why the "candidates needed" figure is missing when no masked LM was given.
NO_GENERATOR = ("not computed: no masked LM was given (base_mlm=None), and Mix And Match's candidates come from a "
                "masked-LM head (§4.3.1); pass the masked LM the classifier was fine-tuned from as base_mlm to "
                "compute it")


# --------------------------------------------------------------------------- the Frankenstein model

def refit_head(model: Any, tokenizer: Any, sentences: Any, *, epochs: int = 2, lr: float = 1e-3, seed: int = 0,
               batch_size: int = 64, threads: int | None = 1) -> list[float]:
    """§4.3.1's option: fine-tune the Frankenstein ``model``'s generation head on public ``sentences``.

    "an adversary or auditor has the option to fine-tune the Frankenstein
    model using a publicly available dataset, re-establishing the connection.
    It is advisable to only fine-tune the generation head while freezing the
    base model": the (fine-tuned) encoder stays frozen, every head weight
    (transform, decoder, bias) learns BERT's masked-LM objective (15 %,
    80/10/10) with AdamW; seeded, with ``threads`` torch threads (default 1, as the targets train: the same
    head whatever the caller's count; None keeps the caller's). Returns the mean loss of each epoch.
    """
    from ...targets.tiny_bert import mlm_epochs
    from ...targets.training import seeded, torch_threads

    rows = [s.split() if isinstance(s, str) else list(s) for s in sentences]
    enc = tokenizer(rows, is_split_into_words=True, padding=True, truncation=True,
                    max_length=getattr(model.config, "max_position_embeddings", 512), return_tensors="pt")
    ids, attention = enc["input_ids"], enc["attention_mask"]
    special = torch.isin(ids, torch.tensor(tokenizer.all_special_ids)) | (attention == 0)
    prefix = model.base_model_prefix + "."
    head = [p for name, p in model.named_parameters() if not name.startswith(prefix)]
    for p in head:
        p.requires_grad_(True)
    device = next(model.parameters()).device
    with seeded(seed, device), torch_threads(threads):
        optimizer = torch.optim.AdamW(head, lr=lr, weight_decay=0.01)
        losses = mlm_epochs(model, optimizer, ids.to(device), attention.to(device), special.to(device),
                            len(tokenizer), epochs=epochs, batch_size=batch_size, mask_probability=0.15,
                            generator=torch.Generator().manual_seed(seed))
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return losses


def _check_refit(refit_on: Any) -> Any:
    if refit_on is None:
        return None
    if isinstance(refit_on, (str, bytes)) or not isinstance(refit_on, Sequence) or len(refit_on) < 1 \
            or not all(isinstance(s, str) or (isinstance(s, Sequence) and all(isinstance(t, str) for t in s))
                       for s in refit_on):
        raise TypeError(f"refit_on must be a non-empty sequence of public sentences (strings or token lists), got "
                        f"{type(refit_on).__name__}; fix: e.g. refit_on=generate_public_corpus(2000) "
                        "(pytest_privleak.data.public_corpus), or None for the paper's default (no re-fit)")
    return refit_on


def is_punctuation(word: str) -> bool:
    """§4.3.2 filter (b): a token made only of punctuation or symbols."""
    return all(c in string.punctuation or not c.isalnum() for c in word)


def _check_parts(classifier: Any, generator: Any, tokenizer: Any, refit_on: Any) -> None:
    """Clear errors for a missing tokenizer, a tokenizer passed as the masked LM, a re-fit without a head."""
    def is_tokenizer(x: Any) -> bool:
        return not isinstance(x, torch.nn.Module) and callable(x) and hasattr(x, "convert_ids_to_tokens")

    if tokenizer is None and is_tokenizer(generator):
        raise TypeError("base_mlm is a tokenizer and tokenizer is missing; fix: mix_and_match_model(classifier, "
                        "tokenizer=tokenizer) for a classifier without a masked LM (exhaustive search only), or "
                        "mix_and_match_model(classifier, base_mlm, tokenizer)")
    if not is_tokenizer(tokenizer):
        raise TypeError(f"tokenizer must be the classifier's transformers tokenizer, got {type(tokenizer).__name__}; "
                        "fix: mix_and_match_model(classifier, base_mlm, tokenizer) or, without a masked LM, "
                        "mix_and_match_model(classifier, tokenizer=tokenizer)")
    if not isinstance(classifier, torch.nn.Module) or not hasattr(classifier, "base_model") \
            or classifier.base_model is classifier:
        raise TypeError(f"classifier must be a transformers classifier with a base encoder (e.g. "
                        f"AutoModelForSequenceClassification), got {type(classifier).__name__}")
    if generator is None and refit_on is not None:
        raise ValueError("refit_on re-fits the Frankenstein model's masked-LM head, but base_mlm is None (no head "
                         "to re-fit); fix: pass base_mlm (AutoModelForMaskedLM of the checkpoint the classifier was "
                         "fine-tuned from) or drop refit_on")


class MixAndMatchModel:
    """What the attack needs of a fine-tuned classifier: the Frankenstein model, the classifier, the tokenizer.

    ``candidates`` are the filtered vocabulary (§4.3.2): whole-word single
    pieces (no ``##`` continuations, no special tokens), no punctuation.
    ``refit_on``: public sentences to re-fit the Frankenstein's head on
    (:func:`refit_head`, §4.3.1's option); None (default) keeps the base head.
    ``generator=None``: no masked LM; the exhaustive search (§5.1.4) needs
    only the classifier, Mix And Match cannot run (:attr:`has_generator`).
    """

    def __init__(self, classifier: Any, generator: Any, tokenizer: Any, *, describe: dict | None = None,
                 refit_on: Any = None) -> None:
        from ...adapters._pieces import WordPieces

        refit_on = _check_refit(refit_on)
        _check_parts(classifier, generator, tokenizer, refit_on)
        self.classifier = classifier.eval()
        self.frankenstein = None if generator is None else frankenstein(classifier, generator)
        #: the head re-fit's epoch losses (empty: the base head as it was, the paper's default)
        self.refit_losses: list[float] = ([] if refit_on is None
                                          else refit_head(self.frankenstein, tokenizer, refit_on))
        self.base_lm = None if generator is None else generator.eval()
        self.pieces = WordPieces(tokenizer)
        self.tokenizer = tokenizer
        words, ids = self.pieces.single_piece_words
        keep = [i for i, w in enumerate(words) if not is_punctuation(w)]
        self.candidate_words: tuple[str, ...] = tuple(words[i] for i in keep)
        self.candidate_ids = torch.tensor([ids[i] for i in keep], dtype=torch.long)
        self._index = {w: i for i, w in enumerate(self.candidate_words)}
        self._describe = describe or {"class": type(classifier).__name__}
        if len(self.candidate_words) < 2:
            raise ValueError("the tokenizer has fewer than 2 whole-word candidates after filtering; fix: pass the "
                             "tokenizer the classifier was trained with")

    @property
    def device(self) -> torch.device:
        return next(self.classifier.parameters()).device

    @property
    def has_generator(self) -> bool:
        """Whether a masked LM was given (Mix And Match's candidates need one; the exhaustive search does not)."""
        return self.frankenstein is not None

    def describe(self) -> dict:
        return dict(self._describe)

    def label_id(self, intent: str) -> int:
        label2id = getattr(self.classifier.config, "label2id", None) or {}
        if intent not in label2id:
            raise ValueError(f"canary intent {intent!r} is not a label of the classifier ({sorted(label2id)}); "
                             "fix: give the canary one of the classifier's labels")
        return int(label2id[intent])

    def candidate_index(self, canary: MaskCanary) -> int:
        """Index of the canary's target in :attr:`candidate_words`; a clear error when it cannot be a candidate."""
        target = canary.target
        spelled = self.tokenizer.convert_tokens_to_string(self.pieces.pieces(target)).strip()
        if spelled in self._index:
            return self._index[spelled]
        raise ValueError(f"canary {canary.text!r}: the target {target!r} is not a whole-word candidate of this "
                         f"tokenizer ({self.pieces.explain(target) if not is_punctuation(target) else 'punctuation'}); "
                         "fix: choose a target that is a single word piece (e.g. from frequency_band(..., "
                         "vocabulary=model.candidate_words))")

    def encode(self, canary: MaskCanary) -> tuple[torch.Tensor, int]:
        """``(ids [L], masked position)`` of the canary with the tokenizer's special frame, target masked."""
        encoded = self.pieces.encode([canary.tokens])
        row, first = encoded.ids[0], encoded.first[0]
        position = len(self.pieces.lead) + first[canary.position]
        ids = torch.tensor(self.pieces.lead + list(row) + self.pieces.tail, dtype=torch.long)
        ids[position] = self.tokenizer.mask_token_id
        return ids, position

    @torch.no_grad()
    def generation_scores(self, ids: torch.Tensor, position: int, generator: str = "frankenstein") -> torch.Tensor:
        """§4.3.1: the Frankenstein (or base LM) logits over :attr:`candidate_ids` at the mask ``[C]``."""
        model = self.frankenstein if generator == "frankenstein" else self.base_lm
        if model is None:
            raise ValueError(f"the {generator} generator needs a masked LM, but base_mlm is None; fix: "
                             "mix_and_match_model(classifier, base_mlm, tokenizer)")
        logits = model(input_ids=ids.unsqueeze(0).to(self.device)).logits[0, position].float()
        require_finite(logits, what=f"the {generator} masked-LM logits",
                       fix="the classifier's encoder or the base generation head holds NaN/inf weights; retrain or "
                           "reload them")
        return logits[self.candidate_ids.to(logits.device)].cpu()

    @torch.no_grad()
    def class_losses(self, ids: torch.Tensor, position: int, candidates: torch.Tensor, label: int,
                     batch_size: int = DEFAULT_BATCH) -> torch.Tensor:
        """§4.3.2: the classifier's cross-entropy on ``label`` with each candidate id in ``position`` ``[N]``."""
        out = []
        for start in range(0, len(candidates), batch_size):
            chunk = candidates[start:start + batch_size]
            batch = ids.unsqueeze(0).repeat(len(chunk), 1)
            batch[:, position] = chunk
            logits = self.classifier(input_ids=batch.to(self.device)).logits.float()
            out.append(F.cross_entropy(logits, torch.full((len(chunk),), label, device=logits.device),
                                       reduction="none").cpu())
        losses = torch.cat(out) if out else torch.empty(0)
        require_finite(losses, what="the classifier's cross-entropy losses on the candidate fills",
                       fix="the classifier returns NaN/inf logits; check its weights (a diverged training) and dtype")
        return losses


def as_attack_model(model: Any) -> MixAndMatchModel:
    """``model`` as a :class:`MixAndMatchModel`: one already, or a target with classifier, generator, tokenizer.

    The Frankenstein model is built once per target and kept on it.
    """
    if isinstance(model, MixAndMatchModel):
        return model
    if all(hasattr(model, a) for a in ("classifier", "generator", "tokenizer")):
        built = getattr(model, "_mix_and_match_model", None)
        if built is None:
            describe = model.describe() if callable(getattr(model, "describe", None)) else None
            built = MixAndMatchModel(model.classifier, model.generator, model.tokenizer, describe=describe)
            model._mix_and_match_model = built
        return built
    raise TypeError(f"model must be a transformer-classifier target (train_target('transformer-classifier', ...)) or "
                    f"mix_and_match_model(classifier, base_mlm, tokenizer), got {type(model).__name__}; fix: wrap "
                    "your fine-tuned classifier with mix_and_match_model(...)")


def mix_and_match_model(classifier: Any, base_mlm: Any = None, tokenizer: Any = None, *,
                        refit_on: Any = None) -> MixAndMatchModel:
    """The attack view of your own fine-tuned classifier: ``classifier`` (AutoModelForSequenceClassification),
    ``base_mlm`` (AutoModelForMaskedLM of the checkpoint it was fine-tuned from) and their ``tokenizer``;
    ``refit_on``: public sentences to re-fit the Frankenstein's head on, encoder frozen (§4.3.1's option).

    ``base_mlm`` is optional: ``mix_and_match_model(classifier, tokenizer=tokenizer)`` serves a classifier
    whose encoder has no masked-LM head (e.g. all-MiniLM-L6-v2). The default (exhaustive) rank and the
    exposure need only the classifier; ``method="mix-and-match"`` then refuses, and the "candidates
    needed" figure is reported as not computed (:data:`NO_GENERATOR`)."""
    return MixAndMatchModel(classifier, base_mlm, tokenizer, refit_on=refit_on)


# --------------------------------------------------------------------------- ranks

def mid_rank(scores: torch.Tensor, true_index: int, *, lower_is_better: bool) -> tuple[float, int, int]:
    """``(mid-rank, best, worst)`` of ``scores[true_index]`` among ``scores`` (ties: expected rank, range)."""
    true = scores[true_index]
    better = int((scores < true).sum()) if lower_is_better else int((scores > true).sum())
    tied = int((scores == true).sum()) - 1
    return 1 + better + tied / 2, 1 + better, 1 + better + tied


@dataclass(frozen=True)
class CanaryRanking:
    """What the attack found for one canary (``rank`` is the gate's figure: the strongest attack that ran)."""

    canary: MaskCanary
    method: str                     # the attack that gave ``rank``
    rank: float                     # mid-rank of the true token (math.inf: not among the candidates pruned)
    rank_range: tuple[int, int]     # over tie-breaking (upper = vocabulary + 1 when not found)
    vocabulary: int                 # |V| after filtering: what the exhaustive search scores
    candidates_needed: float | None   # rank of the true token in the generator's list ("Top K", §5.1.5);
    #                                   None: no masked LM, not computed (NO_GENERATOR says why)
    scored: int                     # classifier forwards this attack ran
    mix_and_match_rank: float | None   # rank after pruning the first candidates_needed ("Beam size")
    exhaustive_rank: float | None
    guesses: tuple[str, ...]        # the attack's top guesses, best first
    seconds: float = 0.0
    generator: str | None = "frankenstein"   # None: no masked LM was given
    candidates_needed_other: float | None = None   # the same figure from the other generator (§5.2 compares)
    secret_loss: float = math.nan   # the classifier's cross-entropy with the true token in place

    @property
    def exposure(self) -> float:
        """``log2 |V| - log2 rank`` bits, ties counted against the secret (module docstring).

        Mix And Match: an upper bound; a secret not among the candidates pruned gets
        ``log2 |V| - log2 (scored + 1)``, the most its unknown rank allows.
        """
        rank = self.scored + 1 if math.isinf(self.rank) else self.rank_range[1]
        return max(0.0, math.log2(self.vocabulary) - math.log2(rank))

    @property
    def exposure_interval(self) -> tuple[float, float]:
        """Exposure bounds: a point for the exhaustive search; for Mix And Match, the true rank may be
        worse by every candidate left unscored (``|V| - scored``), or unknown when the secret was not found."""
        high = self.exposure
        if math.isinf(self.rank):
            return 0.0, high
        worst = min(self.vocabulary, self.rank_range[1] + self.vocabulary - self.scored)
        return max(0.0, math.log2(self.vocabulary) - math.log2(worst)), high

    @property
    def candidate_ratio(self) -> float | None:
        """How many times fewer candidates Mix And Match prunes than the exhaustive search (§5.2: up to 50x);
        None when the candidates needed were not computed (no masked LM)."""
        return None if self.candidates_needed is None else self.vocabulary / self.candidates_needed


@dataclass(frozen=True)
class MixAndMatchMeasurement:
    rankings: tuple[CanaryRanking, ...]
    method: str
    budget: int
    seconds: float = 0.0
    notes: dict = field(default_factory=dict)

    def top_k_hits(self, k: int) -> int:
        return sum(r.rank <= k for r in self.rankings)


def _check_method(method: Any) -> str:
    __tracebackhide__ = True   # a usage error shows at the caller's line
    if method not in METHODS:
        raise ValueError(f"method={method!r} must be one of {METHODS}; fix: 'auto' (default: exhaustive search when "
                         "the vocabulary fits the budget, else Mix And Match), 'exhaustive' (§5.1.4) or "
                         "'mix-and-match' (§4.3)")
    return method


def _check_int(name: str, value: Any, low: int) -> int:
    __tracebackhide__ = True   # a usage error shows at the caller's line
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name}={value!r} must be an integer >= {low}; fix: a whole number such as {name}=512, "
                         f"or leave {name} out for the default")
    return value


def check_options(method: Any, generator: Any, budget: Any, batch_size: Any) -> tuple[str, str, int, int]:
    """The attack's options checked before any work: ``(method, generator, budget, batch_size)``."""
    __tracebackhide__ = True   # a usage error shows at the caller's line
    method = _check_method(method)
    if generator not in GENERATORS:
        raise ValueError(f"generator={generator!r} must be one of {GENERATORS}; fix: 'frankenstein' (fine-tuned "
                         "encoder + base head, §4.3.1) or 'base' (the pretrained masked LM itself)")
    return method, generator, _check_int("budget", budget, 1), _check_int("batch_size", batch_size, 1)


def _check_generator_for(model: MixAndMatchModel, method: str, budget: int) -> None:
    """Refuse an attack that needs the masked LM when none was given (the exhaustive search does not need it)."""
    vocabulary = len(model.candidate_words)
    if model.has_generator or method == "exhaustive" or (method == "auto" and vocabulary <= budget):
        return
    why = ("method='mix-and-match'" if method == "mix-and-match" else
           f"method='auto' with the vocabulary ({vocabulary} whole-word candidates) over budget={budget}")
    raise ValueError(f"{why} needs Mix And Match's candidate generator, a masked LM (§4.3.1), but the model was "
                     "built without one (base_mlm=None); fix: mix_and_match_model(classifier, base_mlm, tokenizer) "
                     "with the AutoModelForMaskedLM the classifier was fine-tuned from, or method='exhaustive' "
                     f"(every candidate scored, needs only the classifier; or budget >= {vocabulary})")


def _exhaustive_without_generator(model: MixAndMatchModel, canary: MaskCanary, ids: torch.Tensor, position: int,
                                  true: int, label: int, batch_size: int, guesses: int,
                                  began: float) -> CanaryRanking:
    """§5.1.4 with the classifier alone: the exact rank; the Mix And Match figures are not computed."""
    vocabulary = len(model.candidate_words)
    losses = model.class_losses(ids, position, model.candidate_ids, label, batch_size)
    rank, best, worst = mid_rank(losses, true, lower_is_better=True)
    top = torch.argsort(losses, stable=True)[:guesses]
    return CanaryRanking(canary, "exhaustive", rank, (best, worst), vocabulary, None, vocabulary, None, rank,
                         tuple(model.candidate_words[i] for i in top.tolist()), time.perf_counter() - began,
                         generator=None, candidates_needed_other=None, secret_loss=float(losses[true]))


def rank_canary(model: MixAndMatchModel, canary: MaskCanary, *, method: str = "auto", budget: int = DEFAULT_BUDGET,
                batch_size: int = DEFAULT_BATCH, guesses: int = 5, generator: str = "frankenstein") -> CanaryRanking:
    """Run the attack of ``method`` on one canary (see the module docstring)."""
    began = time.perf_counter()
    _check_generator_for(model, method, budget)
    true = model.candidate_index(canary)
    label = model.label_id(canary.intent)
    ids, position = model.encode(canary)
    if not model.has_generator:
        return _exhaustive_without_generator(model, canary, ids, position, true, label, batch_size, guesses, began)
    vocabulary = len(model.candidate_words)
    generation = model.generation_scores(ids, position, generator)             # §4.3.1
    order = torch.argsort(generation, descending=True, stable=True)
    needed, _, reach = mid_rank(generation, true, lower_is_better=False)   # reach: prefix that surely holds it
    other = "base" if generator == "frankenstein" else "frankenstein"
    other_needed = mid_rank(model.generation_scores(ids, position, other), true, lower_is_better=False)[0]
    facts = {"generator": generator, "candidates_needed_other": other_needed}
    exhaustive = method == "exhaustive" or (method == "auto" and vocabulary <= budget)
    if exhaustive:                                                             # §5.1.4 baseline: all of V
        losses = model.class_losses(ids, position, model.candidate_ids, label, batch_size)
        rank, best, worst = mid_rank(losses, true, lower_is_better=True)
        head = order[:reach]
        mm = mid_rank(losses[head], int((head == true).nonzero()[0, 0]), lower_is_better=True)[0]
        top = torch.argsort(losses, stable=True)[:guesses]
        return CanaryRanking(canary, "exhaustive", rank, (best, worst), vocabulary, needed, vocabulary, mm, rank,
                             tuple(model.candidate_words[i] for i in top.tolist()), time.perf_counter() - began,
                             **facts, secret_loss=float(losses[true]))
    pruned = order[:min(budget, vocabulary)]                                   # §4.3.2 on the top candidates
    losses = model.class_losses(ids, position, model.candidate_ids[pruned], label, batch_size)
    top = pruned[torch.argsort(losses, stable=True)[:guesses]]
    where = (pruned == true).nonzero()
    if len(where):
        rank, best, worst = mid_rank(losses, int(where[0, 0]), lower_is_better=True)
        mm = mid_rank(losses[:reach], int(where[0, 0]), lower_is_better=True)[0] if reach <= len(pruned) else None
        secret_loss = float(losses[int(where[0, 0])])
    else:
        rank, best, worst, mm = math.inf, len(pruned) + 1, vocabulary, None
        secret_loss = float(model.class_losses(ids, position, model.candidate_ids[true:true + 1], label, 1)[0])
    return CanaryRanking(canary, "mix-and-match", rank, (best, worst), vocabulary, needed, len(pruned), mm, None,
                         tuple(model.candidate_words[i] for i in top.tolist()), time.perf_counter() - began, **facts,
                         secret_loss=secret_loss)


def mix_and_match(model: Any, canaries: Any, *, method: str = "auto", budget: int = DEFAULT_BUDGET,
                  batch_size: int = DEFAULT_BATCH, generator: str = "frankenstein") -> MixAndMatchMeasurement:
    """Rank every canary's target token; ``method='auto'`` is the strongest attack that fits ``budget``.

    ``auto``: the exhaustive search (exact rank; the Mix And Match figures are
    read off the same losses) when the filtered vocabulary has at most
    ``budget`` tokens, else Mix And Match pruning the Frankenstein model's top
    ``budget`` candidates. ``generator``: where candidates come from,
    ``"frankenstein"`` (§4.3.1, default) or ``"base"`` (the pretrained LM);
    unused for a model without a masked LM, which runs the exhaustive search only.
    """
    method, generator, budget, batch_size = check_options(method, generator, budget, batch_size)
    attack_model = as_attack_model(model)
    _check_generator_for(attack_model, method, budget)
    items = as_mask_canaries(canaries)
    began = time.perf_counter()
    rankings = tuple(rank_canary(attack_model, c, method=method, budget=budget, batch_size=batch_size,
                                 generator=generator) for c in items)
    return MixAndMatchMeasurement(rankings, method, budget, time.perf_counter() - began)
