"""Untargeted extraction (Carlini et al. 2021, "Extracting training data from large language models", §5-§6).

No prefix is known: the attacker samples ``N`` texts from the model (top-k,
k = 40, from the beginning-of-sequence token, §4/§5.1), ranks them by how
much more likely the model finds them than something else would (§5.2), and
checks the top-ranked ones against the training data (§6):

- ``"perplexity"``: the model's log-perplexity of the sample (lower first);
- ``"zlib"``: log-perplexity divided by the sample's zlib entropy (bits of
  its zlib-compressed text): a text the model finds likely but zlib cannot
  compress is suspicious;
- ``"reference"``: the ratio of the model's log-perplexity to a reference
  model's (one that never saw the private data) on the same text.

``"auto"`` ranks by ``"reference"`` when a reference model is given and by
``"zlib"`` otherwise (in §6 both found more memorised samples than perplexity
alone).  A top-ranked sample emits a training span when ``min_tokens`` or more
consecutive words of it occur verbatim in one training record; the figure is
the number of distinct spans emitted (a span: a maximal run of the sample's
words whose every ``min_tokens``-word window is in the training data; a span
inside a longer emitted one is not counted again), and the
rate is the fraction of top-ranked samples that emit one.  Words are the
whitespace-split text, so the figure is comparable across tokenizers.

Short records.  §6 counts a sample as memorised when it holds training text
verbatim; ``min_tokens`` only keeps short chance overlaps out.  A record
shorter than ``min_tokens`` words holds no such window, so a model reciting
every short record would show nothing: NLU utterances are mostly 4-8 words,
under the default 8.  A record of ``min_record_tokens`` (default 4) to
``min_tokens - 1`` words is therefore found WHOLE: it is emitted when all
its words occur in order, contiguously, in a sample, and the span is the
record.  Four words is our floor, not the paper's: a whole record of four or
more words is a specific sequence that a model which never saw it rarely
produces (the reference model's figure measures how rarely on the same
records), while one to three words ("yes", "cancel that") are said by any
model of the language.  Records shorter than the floor cannot be found; the
result counts them (:attr:`UntargetedExtraction.records_unfindable`) and the
assertion calls a pass inconclusive when they are most of the records.
"""
from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ...adapters.generation import DEFAULT_TOP_K, check_sampling, check_seed, generator_for, sample
from ...finite import require_finite

METRICS = ("auto", "perplexity", "zlib", "reference")
DEFAULT_SAMPLES = 256
DEFAULT_TOP = 64
DEFAULT_MAX_TOKENS = 32
DEFAULT_MIN_TOKENS = 8
#: Records of this many words up to ``min_tokens - 1`` are found whole (see the module doc).
DEFAULT_MIN_RECORD_TOKENS = 4


@dataclass
class UntargetedExtraction:
    metric: str
    why: str
    samples: list[str]                  # every sample's text, in draw order
    ranked: list[int]                   # sample indices, most suspicious first (the top ``top``)
    spans: list[tuple[str, ...]] = field(default_factory=list)   # distinct training spans emitted, first seen first
    emitting: int = 0                   # top-ranked samples that emit at least one span
    long_enough: int = 0                # top-ranked samples with at least ``reach`` words
    reach: int = 0                      # the fewest words in which a findable record can be emitted
    records: int = 0                    # training records checked against
    records_whole: int = 0              # records shorter than ``min_tokens`` words, found whole
    records_unfindable: int = 0         # records shorter than ``min_record_tokens`` words: cannot be found


def training_texts(training_data: Any) -> list[tuple[str, ...]]:
    """The records to check as word tuples: an NLUDataset's train split, utterances, or strings."""
    records = getattr(training_data, "train", training_data)
    if isinstance(records, str) or not isinstance(records, Sequence) or not records:
        raise ValueError("training_data must be an NLUDataset, or a non-empty list of utterances or strings "
                         f"(the records whose emission is a leak), got {type(training_data).__name__}; fix: pass "
                         "the fine-tuning data, e.g. training_data=data (its train split) or a list of texts")
    out = []
    for i, r in enumerate(records):
        words = tuple(r.split()) if isinstance(r, str) else tuple(getattr(r, "tokens", ()) or ())
        if not words and not isinstance(r, str):
            raise TypeError(f"training_data[{i}] is {type(r).__name__}; expected a string or an Utterance")
        out.append(words)
    return out


def span_index(records: Sequence[tuple[str, ...]], length: int) -> set[tuple[str, ...]]:
    """Every ``length``-word window of every record."""
    return {r[i:i + length] for r in records for i in range(len(r) - length + 1)}


def whole_record_index(records: Sequence[tuple[str, ...]], min_tokens: int,
                       min_record_tokens: int) -> dict[int, set[tuple[str, ...]]]:
    """The records of ``min_record_tokens`` to ``min_tokens - 1`` words, by length (each is found whole)."""
    out: dict[int, set[tuple[str, ...]]] = {}
    for r in records:
        if min_record_tokens <= len(r) < min_tokens:
            out.setdefault(len(r), set()).add(r)
    return out


def emitted_records(words: Sequence[str], index: dict[int, set[tuple[str, ...]]]) -> list[tuple[str, ...]]:
    """The short records that occur whole, contiguously, in ``words``, in order of first position."""
    found = [(i, tuple(words[i:i + n])) for n, recs in index.items()
             for i in range(len(words) - n + 1) if tuple(words[i:i + n]) in recs]
    return [r for _, r in sorted(found, key=lambda f: (f[0], -len(f[1])))]


def emitted_spans(words: Sequence[str], index: set[tuple[str, ...]], length: int) -> list[tuple[str, ...]]:
    """Maximal runs of ``words`` whose every ``length``-word window is in ``index``."""
    hits = [i for i in range(len(words) - length + 1) if tuple(words[i:i + length]) in index]
    spans, start, end = [], None, None
    for i in hits:
        if start is not None and i <= end - length + 1:   # overlaps or abuts the current run's last window
            end = i + length
            continue
        if start is not None:
            spans.append(tuple(words[start:end]))
        start, end = i, i + length
    if start is not None:
        spans.append(tuple(words[start:end]))
    return spans


def zlib_bits(text: str) -> float:
    """Bits of ``text`` compressed by zlib (Carlini et al. 2021 §5.2's zlib entropy)."""
    return 8.0 * len(zlib.compress(text.encode("utf-8")))


def teacher_forced_log_prob(generator: Any, start: Sequence[int], rows: Sequence[Sequence[int]]) -> np.ndarray:
    """Summed natural log-probability of each row's tokens after the prefix ``start``, one batched step per token."""
    if not rows:
        return np.zeros(0)
    width = max(max(len(r) for r in rows), 1)
    pad = generator.eos_id if generator.eos_id is not None else 0
    ids = torch.tensor([list(r) + [pad] * (width - len(r)) for r in rows], dtype=torch.long)
    live = torch.arange(width).unsqueeze(0) < torch.tensor([len(r) for r in rows]).unsqueeze(1)
    log_probs, state = generator.start([list(start)] * len(rows))
    total = torch.zeros(len(rows), dtype=torch.float64)
    for t in range(width):
        got = log_probs.float().cpu().gather(1, ids[:, t:t + 1]).squeeze(1).double()
        total += torch.where(live[:, t], got, 0.0)
        if t < width - 1:
            log_probs, state = generator.step(state, ids[:, t])
    return total.numpy()


def _check(samples: Any, top: Any, max_tokens: Any, min_tokens: Any, metric: str, seed: Any,
           min_record_tokens: Any = DEFAULT_MIN_RECORD_TOKENS) -> None:
    for name, value, example in (("samples", samples, DEFAULT_SAMPLES), ("top", top, DEFAULT_TOP),
                                 ("max_tokens", max_tokens, DEFAULT_MAX_TOKENS),
                                 ("min_tokens", min_tokens, DEFAULT_MIN_TOKENS),
                                 ("min_record_tokens", min_record_tokens, DEFAULT_MIN_RECORD_TOKENS)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {value!r}; fix: e.g. {name}={example} "
                             "(a budget of 0 samples nothing, so it would pass every model)")
    if min_record_tokens > min_tokens:
        raise ValueError(f"min_record_tokens={min_record_tokens} is above min_tokens={min_tokens}: records "
                         f"shorter than {min_tokens} words could then never be found; fix: min_record_tokens <= "
                         f"min_tokens, e.g. min_record_tokens={min(DEFAULT_MIN_RECORD_TOKENS, min_tokens)}")
    if metric not in METRICS:
        raise ValueError(f"metric={metric!r} is not one of {METRICS}; fix: e.g. metric='auto'")
    check_seed(seed)


def untargeted_extraction(model: Any, training_data: Any, *, tokenizer: Any = None, reference: Any = None,
                          reference_tokenizer: Any = None, metric: str = "auto", samples: int = DEFAULT_SAMPLES,
                          top: int = DEFAULT_TOP, top_k: int | None = DEFAULT_TOP_K, top_p: float | None = None,
                          max_tokens: int = DEFAULT_MAX_TOKENS, min_tokens: int = DEFAULT_MIN_TOKENS,
                          min_record_tokens: int = DEFAULT_MIN_RECORD_TOKENS,
                          seed: int = 0) -> UntargetedExtraction:
    """Sample ``samples`` texts, rank them by ``metric``, check the ``top`` first for training spans (windows
    of ``min_tokens`` words, and whole records of ``min_record_tokens`` words or more; see the module doc)."""
    _check(samples, top, max_tokens, min_tokens, metric, seed, min_record_tokens)
    check_sampling(top_k, top_p)
    if metric == "reference" and reference is None:
        raise ValueError("metric='reference' needs reference= (a model that never saw the private data, e.g. the "
                         "base model before fine-tuning); fix: pass reference=..., or metric='zlib'")
    records = training_texts(training_data)
    generator = generator_for(model, tokenizer)
    ref_generator = None if reference is None else generator_for(reference, reference_tokenizer)
    chosen, why = metric, f"metric={metric!r} was asked for"
    if metric == "auto":
        chosen = "reference" if ref_generator is not None else "zlib"
        why = ("metric='auto' ranked by the ratio to the reference model's log-perplexity (a reference was given)"
               if chosen == "reference" else "metric='auto' ranked by log-perplexity over zlib entropy (no "
               "reference model given; pass reference= to rank against one)")
    bos = generator.encode_prefix(())
    g = sample(generator, [bos], samples=samples, max_tokens=max_tokens, top_k=top_k, top_p=top_p, seed=seed)
    eos = generator.eos_id
    rows = [ids[:ids.index(eos) + 1] if eos is not None and eos in ids else ids for ids in g.ids.tolist()]
    texts = [" ".join(generator.decode(r)) for r in rows]
    log_ppl = -g.log_prob.numpy() / np.maximum([len(r) for r in rows], 1)
    if chosen == "perplexity":
        score = log_ppl
    elif chosen == "zlib":
        score = log_ppl / np.array([max(zlib_bits(t), 1.0) for t in texts])
    else:
        ref_bos = ref_generator.encode_prefix(())
        ref_rows = [ref_generator.encode_prefix(t.split())[len(ref_bos):] for t in texts]
        ref_lp = teacher_forced_log_prob(ref_generator, ref_bos, ref_rows)
        ref_ppl = -ref_lp / np.maximum([len(r) for r in ref_rows], 1)
        score = log_ppl / np.maximum(ref_ppl, 1e-12)
    require_finite(score, what=f"the {chosen} scores of the samples", fix="check the models for NaN/inf weights")
    order = np.argsort(score, kind="stable")[:min(top, samples)]
    index = span_index(records, min_tokens)
    wholes = whole_record_index(records, min_tokens, min_record_tokens)
    out = UntargetedExtraction(chosen, why, texts, order.tolist(), records=len(records),
                               records_whole=sum(min_record_tokens <= len(r) < min_tokens for r in records),
                               records_unfindable=sum(len(r) < min_record_tokens for r in records))
    out.reach = min(wholes) if wholes else min_tokens
    seen: dict[tuple[str, ...], None] = {}
    for i in out.ranked:
        words = texts[i].split()
        out.long_enough += len(words) >= out.reach
        found = emitted_spans(words, index, min_tokens) + emitted_records(words, wholes)
        out.emitting += bool(found)
        seen.update(dict.fromkeys(found))
    out.spans = outermost(list(seen))
    return out


def outermost(spans: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """``spans`` without those inside a longer one (a sample cut mid-record emits a part of a span another shows)."""
    joined = ["\x00" + "\x00".join(s) + "\x00" for s in spans]
    return [s for s, j in zip(spans, joined)
            if not any(len(o) > len(j) and j in o for o in joined)]
