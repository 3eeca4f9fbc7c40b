"""Exposure of a canary: how far up the model ranks it among its random alternatives.

Definition (Carlini et al., "The Secret Sharer", quoted as eq. 1 of
d-exposure-discriminative §2): for a canary ``s`` drawn from a random space
``R`` and a score where lower means more likely (log-perplexity for a language
model, training loss for a classifier),

    exposure(s) = log2 |R| - log2 rank(s),
    rank(s)     = 1 + #{r in R, r != s : score(r) <= score(s)}

so ties are counted against the canary (a model that scores everything alike
shows exposure 0), and a canary scoring below every alternative gets the
ceiling ``log2 |R|``.  Three ways to measure it:

- :func:`exact_exposure` enumerates the whole space ``V0^n`` in batches;
- :func:`sampled_exposure` ranks the canary among ``N`` random references
  (ceiling ``log2 N``) and turns a Clopper-Pearson interval on the fraction of
  references at or below the canary into an interval on the exposure; the
  references are distinct secrets (:func:`distinct_references`), so ``N`` is at
  most ``|R| - 1`` and the ceiling stays under ``log2 |R|``, and when ``N``
  would be every other secret the space is scored whole (the figure is exact);
- :func:`extrapolated_exposure` fits a skew-normal to reference scores and
  reads ``-log2 CDF(score(s))`` off it, for spaces too large to enumerate
  (the Secret Sharer's extrapolation), with a Kolmogorov-Smirnov statistic as
  the fit quality and a bootstrap interval.

A Mix And Match canary (:class:`~..mix_and_match.canaries.MaskCanary`, a
labelled sentence whose one token is the secret) has the classifier's
vocabulary as its space: its exposure is ``log2 |V| - log2 rank`` of the
secret token ranked by the classifier's loss (mix-and-match-text-classifiers
§4.3, issue 9 item 4), measured by :func:`.mask_canary.mask_canary_exposure`
(``method``: ``"auto"``, ``"exact"`` = the exhaustive search, or
``"mix-and-match"``).

The chance baseline (:func:`chance_exposure`) is the expected exposure of a
canary the model has not memorised, whose rank is uniform on ``1..|R|``:
``E = log2|R| - log2(|R|!)/|R|``, which tends to ``log2 e ~= 1.44`` bits.

A figure is only computed from what it claims to measure: canary tokens the
target's vocabulary lacks (they would be scored as ``<unk>``, another
sentence) raise ``OutOfVocabularyError``, and scores that are NaN, infinite
or not one per candidate raise before any rank is taken (a NaN loss would
otherwise rank like any other and the gate would pass a broken model).
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..redaction import shown_text
from .figure import Exposure, chance_exposure, exposure_from_scores, sampled_interval, skewnorm_exposure

METHODS = ("auto", "exact", "sampled", "extrapolated", "mix-and-match")
#: Largest space ``method="auto"`` enumerates: covers a 4-digit pin (1e4) and 6 of 12 colours (~3e6).
DEFAULT_EXACT_BUDGET = 2 ** 22
DEFAULT_REFERENCES = 4096
DEFAULT_BATCH = 4096


# --- the measurement ---------------------------------------------------------------------


def exact_from_scores(scores: np.ndarray, canary_index: int) -> Exposure:
    """Exact exposure given the scores of the whole space (``scores[canary_index]`` is the canary)."""
    scores = np.asarray(scores, dtype=np.float64)
    s = float(scores[canary_index])
    size = scores.size
    value, rank = exposure_from_scores(s, np.delete(scores, canary_index), size)
    return Exposure(value, "exact", rank, size, size - 1, math.log2(size), chance_exposure(size),
                    (value, value), s)


def sampled_from_scores(canary_score: float, reference_scores: np.ndarray, space_size: int,
                        confidence: float = 0.95) -> Exposure:
    """Exposure among ``N`` sampled references: ``log2 N - log2 rank``, ceiling ``log2 N``.

    The references must be distinct secrets other than the canary (:func:`distinct_references`), so
    ``N <= |R| - 1`` and the ceiling is below the space's own ``log2 |R|``."""
    refs = np.asarray(reference_scores, dtype=np.float64)
    n = refs.size
    if n > space_size - 1:
        raise ValueError(f"{n} sampled references in a space of {space_size:,} secrets: at most {space_size - 1:,} "
                         "distinct secrets besides the canary exist, and a rank among repeated references can read "
                         f"above the space's ceiling log2 {space_size:,}; fix: draw them with distinct_references(), "
                         "or score the whole space (exact_from_scores)")
    value, rank = exposure_from_scores(canary_score, refs)
    lo, hi = sampled_interval(rank - 1, n, space_size, confidence)
    return Exposure(value, "sampled", rank, space_size, n, math.log2(n), chance_exposure(n + 1, math.log2(n)),
                    (min(lo, value), max(hi, value)), canary_score, confidence)


def extrapolated_from_scores(canary_score: float, reference_scores: np.ndarray, space_size: int,
                             rng: np.random.Generator, confidence: float = 0.95,
                             bootstrap: int = 30) -> Exposure:
    """Skew-normal extrapolation (Secret Sharer), capped at ``log2 |R|``; bootstrap interval over refits."""
    refs = np.asarray(reference_scores, dtype=np.float64)
    ceiling = math.log2(space_size)
    raw, fit = skewnorm_exposure(canary_score, refs)
    value = min(raw, ceiling)
    if bootstrap > 0:
        idx = rng.integers(0, refs.size, size=(bootstrap, refs.size))
        boot = np.array([min(skewnorm_exposure(canary_score, refs[row])[0], ceiling) for row in idx])
        tail = (1.0 - confidence) / 2.0
        interval = (float(np.quantile(boot, tail)), float(np.quantile(boot, 1.0 - tail)))
        interval = (min(interval[0], value), max(interval[1], value))
    else:
        interval = (value, value)
    sampled_bits, rank = exposure_from_scores(canary_score, refs)
    return Exposure(value, "extrapolated", rank, space_size, refs.size, ceiling, chance_exposure(space_size),
                    interval, canary_score, confidence, fit,
                    {"uncapped_bits": raw, "sampled_bits": sampled_bits})


def distinct_references(rng: np.random.Generator, size: int, item: int, references: int) -> np.ndarray | None:
    """``references`` distinct secret numbers of a space of ``size``, uniform without replacement over all but
    ``item``; ``None`` when ``references >= size - 1`` (they would be every other secret: score the space whole).

    Why without replacement: the sampled exposure ``log2 N - log2 rank`` is the exposure in a space of the
    ``N`` references, which stands for the real space only when they are ``N`` distinct secrets of it; drawn
    with replacement, ``N`` can pass ``|R| - 1`` and the figure pass ``log2 |R|`` (a 2-digit pin read 9.97 bits
    of at most 6.64). The first draws are ``rng.integers`` as before and a repeat is replaced by further draws,
    so a space much larger than ``references`` (no repeat) gets the same references as before; over half the
    space is drawn as a prefix of a permutation instead.
    """
    refs = distinct_draw(rng, int(size) - 1, references)
    return None if refs is None else refs + (refs >= item)   # uniform over the space without the item


def distinct_draw(rng: np.random.Generator, others: int, references: int) -> np.ndarray | None:
    """``references`` distinct numbers of ``[0, others)`` in draw order (see :func:`distinct_references`);
    ``None`` when they would be all of them."""
    if references >= others:
        return None
    if 2 * references > others:
        return rng.permutation(others)[:references].astype(np.int64)
    refs = np.zeros(0, dtype=np.int64)
    while refs.size < references:
        merged = np.concatenate([refs, rng.integers(0, others, size=references - refs.size, dtype=np.int64)])
        _, first = np.unique(merged, return_index=True)
        refs = merged[np.sort(first)]         # the first occurrence of each, in draw order
    return refs


def whole_space_note(method: str, references: int, size: int) -> dict[str, str]:
    """The evidence line of a sampled or extrapolated request that scored the whole space instead."""
    return {"why exact": f"method={method!r} with references={references:,}: the space holds {size - 1:,} secrets "
                         "besides this one, so every secret was scored and the figure is exact"}


# --- scoring a canary space in batches ---------------------------------------------------


def space_digits(numbers, base: int, length: int):
    """Secret V0 indices ``[B, n]`` of the candidates numbered ``numbers``: :func:`candidates.space_digits`.

    Kept here so importing this module does not import torch.
    """
    from ..candidates import space_digits as digits

    return digits(numbers, base, length)


SecretScorer = Callable[[Any], np.ndarray]

#: Optional method of a sequence scorer (:class:`~pytest_privleak.protocols.SharedPrefixScorer`):
#: ``score_with_shared_prefix(prefix, vocabulary, choices [B, n], *, intent, tags) -> float array [B]``, the
#: scores ``score`` gives the sentences ``prefix + tuple(vocabulary[c] for c in row)`` labelled ``intent`` and
#: ``tags``. A scorer that has it is handed a canary space batch by batch as indices, so it can run the shared
#: prefix once (a causal LM's key/value cache, a recurrent model's state after the prefix).
SHARED_PREFIX_CAPABILITY = "score_with_shared_prefix"


def takes_labels(method: Callable[..., Any]) -> bool:
    """Whether a ``score_with_shared_prefix`` takes the canary's labels (``intent=``, ``tags=``, or ``**kwargs``);
    the older three-argument form (a language model's, which reads no labels) is called without them."""
    import inspect

    try:
        parameters = inspect.signature(method).parameters
    except (TypeError, ValueError):
        return False
    return ("intent" in parameters and "tags" in parameters) or any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())


def require_canary_vocabulary(target: Any, pattern: Any) -> None:
    """Refuse a canary whose prefix or V0 tokens the target's vocabulary lacks (it would score ``<unk>``).

    A scorer maps an unknown token to ``<unk>``, so the figure would be the
    exposure of another sentence: the same tokens the extraction attack
    refuses (``candidates.vocabulary_rows``) are refused here, by the same
    :class:`~.candidates.OutOfVocabularyError`.  Targets tell their vocabulary by
    ``require_single_pieces`` (transformers adapters: word pieces), ``vocab``
    (built-in targets) or ``vocabulary`` (any SoftInputModel); a scorer with
    none of them (a language model over word pieces) has no unknown tokens.
    """
    from ..candidates import OutOfVocabularyError, missing_tokens_message

    tokens = (*pattern.prefix, *pattern.vocabulary)
    role = f"prefix and reduced vocabulary V0 of canary pattern {pattern.name!r}"
    if hasattr(target, "unknown_words"):   # a language model over pieces: a word may be pieces, never unknown
        unknown = list(target.unknown_words(tokens))
        if unknown:
            raise OutOfVocabularyError(
                f"{role}: {len(unknown)} word(s) become the unknown token of {type(target).__name__}'s tokenizer "
                f"(e.g. {unknown[:5]}), so their sentences would score as other sentences; fix: write the canary "
                "with words the tokenizer spells, or train the model with them in its vocabulary "
                "(train_target(..., extra_tokens=[...]))")
        return
    if hasattr(target, "require_single_pieces"):
        if not _require_known_pieces(target, tokens, role):
            target.require_single_pieces(tokens, role=role)
        return
    vocab = getattr(target, "vocab", None)
    known = getattr(vocab, "token_index", None)
    if known is None:
        vocabulary = getattr(target, "vocabulary", None)
        if vocabulary is None or isinstance(vocabulary, str):
            return
        known = set(vocabulary)
    reserved = ("<pad>", "<unk>")
    missing = [t for t in dict.fromkeys(tokens) if t not in known or t in reserved]
    if missing:
        raise OutOfVocabularyError(
            missing_tokens_message(missing, role, len(known)) + "; or measure a canary whose prefix and "
            "vocabulary the model holds (e.g. a built-in pattern: canary('pin', length=4))")


def _require_known_pieces(target: Any, tokens: tuple[str, ...], role: str) -> bool:
    """Exposure scores whole sentences, so a word may be several word pieces ("4821" -> "48" "##21"), never unknown.

    Refuses (``OutOfVocabularyError``) the words with an unknown piece, which would score another
    sentence; ``False`` when ``target`` does not show its tokenizer (its own single-piece check then applies).
    """
    from ..candidates import OutOfVocabularyError

    pieces = getattr(target, "pieces", None)
    tokenizer = getattr(pieces, "tokenizer", None)
    unk = getattr(tokenizer, "unk_token_id", None)
    if tokenizer is None or unk is None:
        return False
    words = list(dict.fromkeys(tokens))
    ids = tokenizer([[w] for w in words], is_split_into_words=True, add_special_tokens=False)["input_ids"]
    unknown = [w for w, row in zip(words, ids) if not row or unk in row]
    if unknown:
        raise OutOfVocabularyError(
            f"{role}: {len(unknown)} word(s) become the tokenizer's unknown token {tokenizer.unk_token!r} "
            f"(e.g. {unknown[:5]}), so their sentences would score as other sentences; fix: write the canary "
            "with words this tokenizer spells (e.g. string_pattern(..., 'my pin is ####') for digits it knows)")
    return True


def _checked(raw: SecretScorer, target: Any, canary: Any) -> SecretScorer:
    """``raw`` with its output checked: one finite score per candidate (NaN would rank as no exposure)."""
    from ...finite import require_finite

    what = f"the scores {type(target).__name__} returned for candidate secrets of canary {shown_text(canary)!r}"
    fix = ("check the model for NaN or infinite weights and losses (retrain it, e.g. with a lower learning "
           "rate), or make its score() return finite losses")

    def scorer(secret_idx) -> np.ndarray:
        rows = len(secret_idx)
        out = raw(secret_idx)
        if out.shape != (rows,):
            raise ValueError(f"{type(target).__name__} returned scores of shape {list(out.shape)} for {rows} "
                             f"candidate sentences of canary {shown_text(canary)!r}; fix: return one score per sentence "
                             "(score(utterances) -> array [N], score_token_ids(ids [N, L], ...) -> tensor [N])")
        require_finite(out, what=what, fix=fix)
        return out

    return scorer


def secret_scorer(target: Any, canary: Any) -> SecretScorer:
    """``f(secret_indices [B, n]) -> scores [B]`` for candidates of ``canary``'s pattern.

    Fast paths, in order:

    * a target with ``vocab`` (``targets.vocab.Vocabulary``) and
      ``score_token_ids(ids [B, L], intent, tags) -> Tensor[B]`` gets token-id tensors
      directly (no Python objects per candidate);
    * a target with ``score_with_shared_prefix(prefix, vocabulary, choices [B, n], *, intent, tags)
      -> array [B]`` (:class:`~pytest_privleak.protocols.SharedPrefixScorer`: the causal-LM adapter, the
      ``causal-lm`` target, an own model such as the sample project's GRU; see
      :data:`SHARED_PREFIX_CAPABILITY`) gets the pattern's prefix and V0 once and each batch's V0
      indices, so it can compute the prefix once and only the secrets per batch; ``intent`` and
      ``tags`` (the canary's labels, which a classifier's training loss reads) are passed when the
      method takes them.

    Any other :class:`~pytest_privleak.protocols.SequenceScorer` is called with utterances.
    Canary tokens outside the target's vocabulary are refused
    (:func:`require_canary_vocabulary`); scores must be finite, one per candidate.
    """
    import torch

    pattern = canary.pattern
    vocab = getattr(target, "vocab", None)
    fast_path = hasattr(target, "score_token_ids") and hasattr(vocab, "token_ids")
    if not fast_path and not hasattr(target, "score"):
        raise TypeError(f"{type(target).__name__} is not a sequence scorer; give it score(utterances) -> "
                        "array (lower = more likely), see pytest_privleak.protocols.SequenceScorer")
    require_canary_vocabulary(target, pattern)
    if fast_path:
        prefix = torch.tensor(vocab.token_ids(pattern.prefix), dtype=torch.long)
        v0 = torch.tensor(vocab.token_ids(pattern.vocabulary, strict=True), dtype=torch.long)
        tags, intent = tuple(pattern.tags), pattern.intent

        def fast(secret_idx) -> np.ndarray:
            secret_idx = torch.as_tensor(secret_idx, dtype=torch.long)
            ids = torch.cat([prefix.expand(secret_idx.shape[0], -1), v0[secret_idx]], dim=1)
            with torch.inference_mode():
                out = target.score_token_ids(ids, intent, tags)
            return torch.as_tensor(out).detach().to("cpu", torch.float64).numpy()

        return _checked(fast, target, canary)
    if hasattr(target, SHARED_PREFIX_CAPABILITY):
        prefix, words = tuple(pattern.prefix), tuple(pattern.vocabulary)
        method = getattr(target, SHARED_PREFIX_CAPABILITY)
        labels = {"intent": pattern.intent, "tags": tuple(pattern.tags)} if takes_labels(method) else {}

        def shared(secret_idx) -> np.ndarray:
            return np.asarray(method(prefix, words, np.asarray(secret_idx), **labels), dtype=np.float64)

        return _checked(shared, target, canary)
    from ...data.types import Utterance

    prefix, words, tags, intent = tuple(pattern.prefix), tuple(pattern.vocabulary), tuple(pattern.tags), pattern.intent
    # every candidate is made of these tokens and tags: checked once here, not once per candidate
    Utterance(prefix + words, ("O",) * (len(prefix) + len(words)), intent)
    Utterance(prefix + words[:1] * pattern.length, tags, intent)

    def slow(secret_idx) -> np.ndarray:
        rows = np.asarray(secret_idx).tolist()
        utts = [Utterance.checked_parts(prefix + tuple(words[i] for i in row), tags, intent) for row in rows]
        return np.asarray(target.score(utts), dtype=np.float64)

    return _checked(slow, target, canary)


def score_secrets(scorer: SecretScorer, secrets, batch_size: int, *, label: str | None = None) -> np.ndarray:
    """Scores of the candidate secrets ``[K, n]`` (V0 indices), ``batch_size`` rows per forward pass.

    ``label``: what the scoring is of (``"exposure of my pin code is 1 2 3 4"``); a scoring that runs longer
    than a few seconds then shows its progress, secrets scored of the space (:class:`~...progress.work.Work`).
    """
    from ...progress.work import Work

    out = np.empty(secrets.shape[0], dtype=np.float64)
    with Work(label or "exposure", secrets.shape[0], unit="secret", phase="scored") as work:
        for start in range(0, secrets.shape[0], batch_size):
            chunk = secrets[start:start + batch_size]
            out[start:start + chunk.shape[0]] = scorer(chunk)
            work.advance(chunk.shape[0])
    return out


#: Integer arguments of :func:`compute_exposure`: (smallest allowed, the example a fix suggests).
_INTEGER_ARGUMENTS = {"references": (1, DEFAULT_REFERENCES), "exact_budget": (1, DEFAULT_EXACT_BUDGET),
                      "batch_size": (1, DEFAULT_BATCH), "bootstrap": (0, 30), "seed": (0, 0)}


def check_arguments(canary: Any, method: str, confidence: float, **integers: Any) -> None:
    """Raise naming the first bad argument of :func:`compute_exposure` and its fix."""
    from ...canaries import Canary
    from ..mix_and_match.canaries import MaskCanary

    if not isinstance(canary, (Canary, MaskCanary)):
        raise TypeError(f"canary must be a Canary or a MaskCanary, got {type(canary).__name__}; fix: build one with "
                        "canary('pin', length=4) (pytest_privleak.canaries) or mask_canary('i bought new towels .', "
                        "'Intent') (pytest_privleak.attacks.mix_and_match.canaries)")
    if method not in METHODS:
        raise ValueError(f"method={method!r} is not one of {METHODS}; fix: e.g. method='auto'")
    if method == "mix-and-match" and not isinstance(canary, MaskCanary):
        raise ValueError("method='mix-and-match' ranks one token of a labelled sentence and needs a MaskCanary; "
                         "fix: pass mask_canary('i bought new towels .', 'Intent'), or use method='auto' for "
                         f"canary {shown_text(canary)!r}")
    for name, value in integers.items():
        low, example = _INTEGER_ARGUMENTS[name]
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < low:
            raise ValueError(f"{name} must be an integer >= {low}, got {value!r}; fix: e.g. {name}={example}")
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be a number in (0, 1), got {confidence!r}; fix: e.g. confidence=0.95")


def compute_exposure(target: Any, canary: Any, *, method: str = "auto", references: int = DEFAULT_REFERENCES,
                     exact_budget: int = DEFAULT_EXACT_BUDGET, seed: int = 0, confidence: float = 0.95,
                     batch_size: int = DEFAULT_BATCH, bootstrap: int = 30) -> Exposure:
    """Exposure of ``canary`` (a :class:`~pytest_privleak.canaries.Canary`) under ``target``.

    ``method="auto"`` enumerates when ``|V0|^n <= exact_budget``, else extrapolates
    from ``references`` random candidates (the sampled rank is reported beside it).
    A :class:`~..mix_and_match.canaries.MaskCanary` (``target``: a ``transformer-classifier``
    target or ``mix_and_match_model(...)``) is ranked over the classifier's vocabulary
    (:func:`.mask_canary.mask_canary_exposure`): ``"auto"`` searches it exhaustively
    when it has at most ``exact_budget`` tokens, ``"exact"`` always does, and
    ``"mix-and-match"`` prunes the generator's top ``references`` candidates.
    The recorded :class:`~pytest_privleak.results.LeakResult` of this figure is
    ``exposure_assertion.measure_exposure``.
    """
    check_arguments(canary, method, confidence, references=references, exact_budget=exact_budget,
                    batch_size=batch_size, bootstrap=bootstrap, seed=seed)
    from ..mix_and_match.canaries import MaskCanary

    if isinstance(canary, MaskCanary):   # the secret is one token of a labelled sentence
        from .mask_canary import mask_canary_exposure

        return mask_canary_exposure(target, canary, method=method, budget=exact_budget, candidates=references,
                                    batch_size=batch_size)
    pattern = canary.pattern
    base, length, size = len(pattern.vocabulary), pattern.length, pattern.space_size
    if method == "auto":
        method = "exact" if size <= exact_budget else "extrapolated"
    if size < 2:
        raise ValueError("the canary space has fewer than 2 secrets; exposure is undefined")
    from ..candidates import enumerate_space, secret_index

    scorer = secret_scorer(target, canary)
    label = f"exposure of {shown_text(canary)}"   # the progress of a long scoring names the canary, redacted
    number = secret_index(canary.secret_indices, base)
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x6578706F]))  # "expo"
    refs = None if method == "exact" else distinct_references(rng, size, number, references)
    if refs is None:   # exact, or references that would be every other secret
        space = enumerate_space(base, length, budget=None)
        exact = exact_from_scores(score_secrets(scorer, space, batch_size, label=label), number)
        return exact if method == "exact" else dataclasses.replace(
            exact, evidence={**exact.evidence, **whole_space_note(method, references, size)})
    secrets = space_digits(np.concatenate([[number], refs]), base, length)
    scores = score_secrets(scorer, secrets, batch_size, label=label)
    if method == "sampled":
        return sampled_from_scores(scores[0], scores[1:], size, confidence)
    return extrapolated_from_scores(scores[0], scores[1:], size, rng, confidence, bootstrap)

