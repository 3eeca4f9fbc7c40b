"""Next-token generation over any causal language model: the small protocol the extraction attacks use.

The extraction attacks (targeted: the Secret Sharer's search and sampling from
a canary's prefix; untargeted: Carlini et al. 2021 §5 sampling) need only this
of a model, :class:`TokenGenerator`:

- ``encode_prefix(words) -> ids`` (with the beginning-of-sequence token; a word
  the vocabulary lacks raises :class:`~..attacks.candidates.OutOfVocabularyError`),
  ``encode_words(words) -> [ids per word]`` (each word as a continuation),
  ``decode(ids) -> words``, ``eos_id``;
- ``start(prefixes) -> (log_probs [B, V], state)``: float32 next-token
  log-probabilities after each token-id prefix, and the state to go on from;
- ``step(state, tokens [B]) -> (log_probs [B, V], state)``: feed one token per row;
- ``select(state, rows) -> state``: keep, reorder or repeat rows (beam search,
  one prefix fanned out to many samples). The old state must not be used after it.

Two implementations: :class:`CausalLMGenerator` for a transformers causal LM
and its tokenizer (left-padded prefixes, the model's key/value cache carried
from step to step, so each new token costs one one-token forward), and
:class:`LSTMGenerator` for the built-in ``lstm-lm`` target (its word
vocabulary; ``</s>`` is the end-of-sequence token). :func:`generator_for`
picks one. Every log-probability batch is checked finite (a NaN logit would
make any sampler pick arbitrary tokens and a gate pass on a broken model).

:func:`generate_from_prefixes` is the stable entry point other attacks call
(PII reproduction, issue 20): greedy, beam or top-k / nucleus sampling from
each prefix, returning the generated continuations as text.
"""
from __future__ import annotations

import inspect
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import torch

from ..protocols import OutOfVocabularyError
from ..finite import require_finite

GENERATION_METHODS = ("greedy", "beam", "sampling")
#: Carlini et al. 2021 §4 sample with top-k, k = 40.
DEFAULT_TOP_K = 40
DEFAULT_MAX_TOKENS = 16
_FIX_NAN = ("check the model's weights for NaN/inf (a diverged fine-tune), or load it in float32 or bfloat16 "
            "instead of float16")


@runtime_checkable
class TokenGenerator(Protocol):
    """Batched next-token log-probabilities over token-id prefixes, with tokenize / detokenize."""

    eos_id: int | None
    vocab_size: int

    def encode_prefix(self, words: Sequence[str]) -> list[int]: ...

    def encode_words(self, words: Sequence[str]) -> list[list[int]]: ...

    def decode(self, ids: Sequence[int]) -> list[str]: ...

    def start(self, prefixes: Sequence[Sequence[int]]) -> tuple[torch.Tensor, Any]: ...

    def step(self, state: Any, tokens: torch.Tensor) -> tuple[torch.Tensor, Any]: ...

    def select(self, state: Any, rows: torch.Tensor) -> Any: ...


def _checked(log_probs: torch.Tensor, model: Any) -> torch.Tensor:
    require_finite(log_probs, what=f"the next-token log-probabilities of {type(model).__name__}", fix=_FIX_NAN)
    return log_probs


def _words(prefix: str | Sequence[str], where: str) -> tuple[str, ...]:
    if isinstance(prefix, str):
        return tuple(prefix.split())
    words = tuple(prefix)
    if not all(isinstance(w, str) for w in words):
        raise TypeError(f"{where} must be a string or a sequence of word strings, got {prefix!r}")
    return words


# --- the built-in LSTM LM ------------------------------------------------------------------


class LSTMGenerator:
    """:class:`TokenGenerator` over the built-in ``lstm-lm`` target (words; ``</s>`` ends a generation)."""

    kind = "lstm-lm"

    def __init__(self, target: Any) -> None:
        self.target = target
        self.vocab = target.vocab
        self.eos_id: int | None = target.net.boundary
        self.vocab_size = target.net.boundary + 1

    @property
    def device(self) -> torch.device:
        return self.target.device

    def describe(self) -> dict[str, Any]:
        return {"adapter": f"generation:{self.kind}", "vocabulary": len(self.vocab.tokens)}

    def encode_prefix(self, words: Sequence[str]) -> list[int]:
        return self._ids(words, "prefix")

    def encode_words(self, words: Sequence[str]) -> list[list[int]]:
        return [[i] for i in self._ids(words, "words")]

    def _ids(self, words: Sequence[str], role: str) -> list[int]:
        index = self.vocab.token_index
        missing = [w for w in dict.fromkeys(words) if w not in index or w in ("<pad>", "<unk>")]
        if missing:
            raise OutOfVocabularyError(
                f"{len(missing)} {role} word(s) are not in the lstm-lm target's vocabulary "
                f"({len(index)} words): {missing[:8]}; they would be read as <unk>, another sentence. Fix: give a "
                "prefix in the training data's words, or train the target with them "
                f"(train_target('lstm-lm', ..., extra_tokens={missing[:8]!r}))")
        return [index[w] for w in words]

    def decode(self, ids: Sequence[int]) -> list[str]:
        tokens = self.vocab.tokens
        return [tokens[i] if i < len(tokens) else "</s>" for i in ids if i != self.eos_id]

    def start(self, prefixes: Sequence[Sequence[int]]) -> tuple[torch.Tensor, Any]:
        rows = len(prefixes)
        log_probs = torch.empty(rows, self.vocab_size, device=self.device)
        h = c = None
        by_length: dict[int, list[int]] = {}
        for i, p in enumerate(prefixes):
            by_length.setdefault(len(p), []).append(i)
        for length, members in by_length.items():   # one forward per prefix length, not per prefix
            ids = torch.tensor([list(prefixes[i]) for i in members], dtype=torch.long).reshape(len(members), length)
            lp, (hh, cc) = self.target.next_token_log_probs(ids)
            if h is None:
                h = hh.new_empty(hh.shape[0], rows, hh.shape[2])
                c = cc.new_empty(cc.shape[0], rows, cc.shape[2])
            at = torch.tensor(members, device=self.device)
            log_probs[at], h[:, at], c[:, at] = lp, hh, cc
        return _checked(log_probs, self.target), (h, c)

    def step(self, state: Any, tokens: torch.Tensor) -> tuple[torch.Tensor, Any]:
        lp, state = self.target.next_token_log_probs(tokens.to(self.device).reshape(-1, 1), state)
        return _checked(lp, self.target), state

    def select(self, state: Any, rows: torch.Tensor) -> Any:
        rows = rows.to(self.device)
        return state[0][:, rows], state[1][:, rows]


# --- transformers causal LMs ---------------------------------------------------------------


def _cache_of(output: Any) -> Any:
    cache = getattr(output, "cache", None)
    return cache if cache is not None else output.past_key_values


@dataclass
class _CacheState:
    past: Any               # the model's key/value cache (a transformers Cache)
    mask: torch.Tensor      # [B, T] attention mask over the cached positions (left padding is 0)
    position: torch.Tensor  # [B] position id of the next token


class CausalLMGenerator:
    """:class:`TokenGenerator` over a transformers causal LM and its tokenizer (key/value cache, left padding)."""

    kind = "transformers-causal-lm"

    def __init__(self, model: Any, tokenizer: Any) -> None:
        if not isinstance(model, torch.nn.Module) or not callable(getattr(model, "generate", None)):
            raise TypeError(f"model must be a loaded transformers causal LM with a generate method, got "
                            f"{type(model).__name__}; fix: load it with AutoModelForCausalLM.from_pretrained(...)")
        if not callable(tokenizer) or not hasattr(tokenizer, "decode"):
            raise TypeError(f"tokenizer must be a transformers tokenizer, got {type(tokenizer).__name__}; fix: "
                            "AutoTokenizer.from_pretrained(the model's folder)")
        self.model = model.eval()
        self.tokenizer = tokenizer
        bos = tokenizer.bos_token_id
        self.bos_id: int | None = bos if bos is not None else getattr(model.config, "bos_token_id", None)
        eos = tokenizer.eos_token_id
        self.eos_id = eos if eos is not None else getattr(model.config, "eos_token_id", None)
        self.vocab_size = int(model.get_output_embeddings().weight.shape[0])
        pad = tokenizer.pad_token_id
        self.pad_id = pad if pad is not None else (self.eos_id if self.eos_id is not None else 0)
        self._special = set(tokenizer.all_special_ids)
        # transformers >= 5.2x names the key/value cache argument `cache` (`past_key_values` before)
        self._cache_arg = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"

    @property
    def device(self) -> torch.device:
        return self.model.get_input_embeddings().weight.device

    def describe(self) -> dict[str, Any]:
        return {"adapter": f"generation:{self.kind}", "model": type(self.model).__name__,
                "device": str(self.device)}

    def _unknown(self, words: Sequence[str], rows: Sequence[Sequence[int]]) -> list[str]:
        unk = self.tokenizer.unk_token_id
        return [w for w, r in zip(words, rows) if not r or (unk is not None and unk in r)]

    def encode_prefix(self, words: Sequence[str]) -> list[int]:
        ids = list(self.tokenizer(" ".join(words), add_special_tokens=True)["input_ids"]) if words else []
        bad = self._unknown(words, self.encode_words(words)) if words else []
        if bad:
            raise OutOfVocabularyError(
                f"prefix word(s) {bad[:8]} become the tokenizer's unknown token "
                f"{self.tokenizer.unk_token!r}, so generation would start from another text; fix: write the "
                "prefix with words this tokenizer spells")
        if self.bos_id is not None and (not ids or ids[0] != self.bos_id):
            ids = [self.bos_id] + ids
        if not ids:
            raise ValueError("an empty prefix needs a beginning-of-sequence token to condition on, and this "
                             "tokenizer has none; fix: set tokenizer.bos_token, or give a prefix")
        return ids

    def encode_words(self, words: Sequence[str]) -> list[list[int]]:
        """Each word's pieces as a continuation (after a space, as it follows a prefix in running text)."""
        if not words:
            return []
        rows = [list(r) for r in self.tokenizer([" " + w for w in words], add_special_tokens=False)["input_ids"]]
        bad = self._unknown(words, rows)
        if bad:
            raise OutOfVocabularyError(f"word(s) {bad[:8]} become the tokenizer's unknown token "
                                       f"{self.tokenizer.unk_token!r}; fix: use words this tokenizer spells")
        return rows

    def decode(self, ids: Sequence[int]) -> list[str]:
        return self.tokenizer.decode([i for i in ids if i not in self._special]).split()

    @torch.no_grad()
    def start(self, prefixes: Sequence[Sequence[int]]) -> tuple[torch.Tensor, _CacheState]:
        lengths = torch.tensor([len(p) for p in prefixes])
        width = int(lengths.max())
        ids = torch.tensor([[self.pad_id] * (width - len(p)) + list(p) for p in prefixes], dtype=torch.long)
        mask = (torch.arange(width) >= (width - lengths).unsqueeze(1)).long()
        position = (mask.cumsum(1) - 1).clamp(min=0)
        ids, mask, position = ids.to(self.device), mask.to(self.device), position.to(self.device)
        out = self.model(input_ids=ids, attention_mask=mask, position_ids=position, use_cache=True)
        log_probs = torch.log_softmax(out.logits[:, -1].float(), dim=-1)
        return _checked(log_probs, self.model), _CacheState(_cache_of(out), mask, position[:, -1] + 1)

    @torch.no_grad()
    def step(self, state: _CacheState, tokens: torch.Tensor) -> tuple[torch.Tensor, _CacheState]:
        mask = torch.cat([state.mask, state.mask.new_ones(state.mask.shape[0], 1)], dim=1)
        out = self.model(input_ids=tokens.to(self.device).reshape(-1, 1), attention_mask=mask,
                         position_ids=state.position.unsqueeze(1), use_cache=True, **{self._cache_arg: state.past})
        log_probs = torch.log_softmax(out.logits[:, -1].float(), dim=-1)
        return _checked(log_probs, self.model), _CacheState(_cache_of(out), mask, state.position + 1)

    def select(self, state: _CacheState, rows: torch.Tensor) -> _CacheState:
        rows = rows.to(self.device)
        past = state.past
        if hasattr(past, "reorder_cache"):
            past.reorder_cache(rows)   # index_select per layer: repeats and reorders rows
        else:                          # a legacy tuple cache
            past = tuple(tuple(t.index_select(0, rows) for t in layer) for layer in past)
        return _CacheState(past, state.mask[rows], state.position[rows])


def generator_for(model: Any, tokenizer: Any = None) -> TokenGenerator:
    """The :class:`TokenGenerator` of ``model``: itself when it implements the protocol, the ``lstm-lm``
    target's, a transformers causal LM's (``tokenizer`` required), or that of an object holding both as
    ``.model`` and ``.tokenizer`` (the causal-LM adapter and target). Anything else is a clear ``TypeError``."""
    if isinstance(model, TokenGenerator):
        return model
    if callable(getattr(model, "next_token_log_probs", None)) and hasattr(model, "vocab"):
        return LSTMGenerator(model)
    inner = getattr(model, "model", None)
    if isinstance(inner, torch.nn.Module) and getattr(model, "tokenizer", None) is not None:
        model, tokenizer = inner, model.tokenizer   # a wrapper holding both (the causal-LM adapter or target)
    if isinstance(model, torch.nn.Module):
        from .language_model import is_causal_lm

        if not is_causal_lm(model) or not callable(getattr(model, "generate", None)):
            raise TypeError(f"{type(model).__name__} is not a causal language model with a generate method, so it "
                            "cannot continue a prefix; fix: load a causal LM (AutoModelForCausalLM), or for a masked "
                            "LM or classifier measure exposure or membership instead")
        if tokenizer is None:
            raise TypeError(f"a transformers model ({type(model).__name__}) needs its tokenizer to generate text; "
                            "fix: pass tokenizer=AutoTokenizer.from_pretrained(the model's folder)")
        return CausalLMGenerator(model, tokenizer)
    raise TypeError(f"{type(model).__name__} cannot generate: it has no next-token log-probabilities; fix: pass the "
                    "built-in 'lstm-lm' or 'causal-lm' target, a transformers causal LM with its tokenizer, or an "
                    "object implementing pytest_privleak.adapters.generation.TokenGenerator")


# --- decoding ------------------------------------------------------------------------------


def filter_top_k_top_p(log_probs: torch.Tensor, top_k: int | None, top_p: float | None) -> torch.Tensor:
    """``log_probs [B, V]`` with tokens outside the top ``k`` and outside the nucleus of mass ``p`` set to -inf
    (Holtzman et al. 2020 nucleus: the smallest set of most likely tokens whose mass reaches ``p``)."""
    out = log_probs
    if top_k is not None and top_k < out.shape[-1]:
        kth = out.topk(top_k, dim=-1).values[:, -1:]
        out = out.masked_fill(out < kth, float("-inf"))
    if top_p is not None and top_p < 1.0:
        sorted_lp, order = out.sort(dim=-1, descending=True)
        mass_before = sorted_lp.softmax(-1).cumsum(-1) - sorted_lp.softmax(-1)
        drop_sorted = mass_before >= top_p
        drop = torch.zeros_like(drop_sorted).scatter(1, order, drop_sorted)
        out = out.masked_fill(drop, float("-inf"))
    return out


@dataclass
class Generations:
    """Generated token ids ``[B, T]`` (``eos``-padded after the end), their summed log-probabilities (nats)
    under the unfiltered model, and the row of the prefix each came from."""

    ids: torch.Tensor
    log_prob: torch.Tensor
    prefix_row: torch.Tensor


def _fan_out(generator: TokenGenerator, prefixes: Sequence[Sequence[int]], copies: int):
    log_probs, state = generator.start(prefixes)
    rows = torch.arange(len(prefixes)).repeat_interleave(copies)
    return log_probs[rows.to(log_probs.device)], generator.select(state, rows), rows


def sample(generator: TokenGenerator, prefixes: Sequence[Sequence[int]], *, samples: int, max_tokens: int,
           top_k: int | None = DEFAULT_TOP_K, top_p: float | None = None, seed: int = 0,
           greedy: bool = False) -> Generations:
    """``samples`` continuations of each prefix, all rows of all prefixes in one batch (Carlini 2021 §4: top-k).

    ``greedy=True`` takes the most likely token at each step (one continuation per prefix is enough).
    A row that emits ``eos`` stops there (later tokens are ``eos``).
    """
    torch_gen = torch.Generator().manual_seed(int(seed))
    log_probs, state, rows = _fan_out(generator, prefixes, samples)
    eos = generator.eos_id
    batch = rows.shape[0]
    done = torch.zeros(batch, dtype=torch.bool)
    total = torch.zeros(batch, dtype=torch.float64)
    out = []
    for t in range(max_tokens):
        lp = log_probs.float().cpu()
        if greedy:
            token = lp.argmax(-1)
        else:
            probs = filter_top_k_top_p(lp, top_k, top_p).softmax(-1)
            token = torch.multinomial(probs, 1, generator=torch_gen).squeeze(1)
        if eos is not None:
            token = torch.where(done, torch.full_like(token, eos), token)
        total += torch.where(done, 0.0, lp.gather(1, token.unsqueeze(1)).squeeze(1).double())
        out.append(token)
        if eos is not None:
            done |= token == eos
        if bool(done.all()) or t == max_tokens - 1:
            break
        log_probs, state = generator.step(state, token)
    return Generations(torch.stack(out, 1), total, rows)


def beam_search(generator: TokenGenerator, prefixes: Sequence[Sequence[int]], *, beams: int,
                max_tokens: int) -> Generations:
    """The ``beams`` most likely continuations of ``max_tokens`` tokens kept by beam search, best first per prefix.

    All prefixes' beams step together; a beam that emitted ``eos`` keeps its score and only extends with ``eos``.
    """
    log_probs, state, _ = _fan_out(generator, prefixes, 1)
    n, vocab, eos = len(prefixes), generator.vocab_size, generator.eos_id
    lp = log_probs.float().cpu()
    score, token = lp.topk(min(beams, vocab), dim=-1)                     # [P, b]
    width = score.shape[1]
    state = generator.select(state, torch.arange(n).repeat_interleave(width))
    seqs = token.reshape(-1, 1)
    score = score.reshape(-1).double()
    for _ in range(max_tokens - 1):
        done = seqs[:, -1] == eos if eos is not None else torch.zeros(seqs.shape[0], dtype=torch.bool)
        log_probs, state = generator.step(state, seqs[:, -1])
        lp = log_probs.float().cpu().double()
        if eos is not None:   # a finished beam extends only by eos, at no cost
            finished = torch.full_like(lp, float("-inf"))
            finished[:, eos] = 0.0
            lp = torch.where(done.unsqueeze(1), finished, lp)
        joint = (score.unsqueeze(1) + lp).reshape(n, -1)                  # [P, b * V]
        grown = min(beams, joint.shape[1])                                # fewer than `beams` only at the start
        score, flat = joint.topk(grown, dim=-1)
        parent = (flat // vocab) + torch.arange(n).unsqueeze(1) * width
        parent, token = parent.reshape(-1), (flat % vocab).reshape(-1)
        seqs = torch.cat([seqs[parent], token.unsqueeze(1)], dim=1)
        score, width = score.reshape(-1), grown
        state = generator.select(state, parent)
    return Generations(seqs, score, torch.arange(n).repeat_interleave(width))


def _check_positive(name: str, value: Any, example: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}; fix: e.g. {name}={example}")
    return value


def check_seed(seed: Any) -> int:
    """``seed``: an integer >= 0 (``1.7`` or ``"3"`` would be coerced to another seed than the one written, and
    numpy refuses negative seeds, so the generation attacks refuse them too)."""
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}; fix: e.g. seed=0 (the same seed gives the "
                         "same generations)")
    return int(seed)


def check_sampling(top_k: Any, top_p: Any) -> None:
    """``top_k``: ``None`` or an integer >= 1; ``top_p``: ``None`` or a number in (0, 1]."""
    if top_k is not None:
        _check_positive("top_k", top_k, DEFAULT_TOP_K)
    if top_p is not None and (isinstance(top_p, bool) or not isinstance(top_p, (int, float))
                              or not 0.0 < top_p <= 1.0):
        raise ValueError(f"top_p must be None or a number in (0, 1], got {top_p!r}; fix: e.g. top_p=0.9")


def generate(generator: TokenGenerator, prefixes: Sequence[Sequence[int]], *, method: str, budget: int,
             max_tokens: int, seed: int = 0, top_k: int | None = DEFAULT_TOP_K,
             top_p: float | None = None) -> list[list[list[int]]]:
    """Token ids of the continuations of each prefix: ``method`` greedy (1), beam (``budget`` beams, best
    first) or sampling (``budget`` samples, in draw order); ``eos`` and what follows it are cut."""
    if method not in GENERATION_METHODS:
        raise ValueError(f"method={method!r} is not one of {GENERATION_METHODS}; fix: e.g. method='sampling'")
    _check_positive("budget", budget, 10)
    _check_positive("max_tokens", max_tokens, DEFAULT_MAX_TOKENS)
    check_sampling(top_k, top_p)
    seed = check_seed(seed)
    if not prefixes:
        return []
    if method == "beam":
        g = beam_search(generator, prefixes, beams=budget, max_tokens=max_tokens)
    else:
        g = sample(generator, prefixes, samples=1 if method == "greedy" else budget, max_tokens=max_tokens,
                   top_k=top_k, top_p=top_p, seed=seed, greedy=method == "greedy")
    out: list[list[list[int]]] = [[] for _ in prefixes]
    eos = generator.eos_id
    for row, ids in zip(g.prefix_row.tolist(), g.ids.tolist()):
        out[row].append(ids[:ids.index(eos)] if eos is not None and eos in ids else ids)
    return out


def generate_from_prefixes(generator: Any, prefixes: Sequence[str | Sequence[str]], *, method: str = "sampling",
                           budget: int = 10, seed: int = 0, max_tokens: int = DEFAULT_MAX_TOKENS,
                           top_k: int | None = DEFAULT_TOP_K, top_p: float | None = None,
                           tokenizer: Any = None) -> list[list[str]]:
    """The continuations a model generates from each prefix, as text: ``out[i]`` lists those of ``prefixes[i]``.

    ``generator``: a :class:`TokenGenerator`, the built-in ``lstm-lm`` (or ``causal-lm``) target, or a
    transformers causal LM with ``tokenizer=``. ``prefixes``: strings (split on whitespace) or word
    sequences; each is encoded with the beginning-of-sequence token, and a word the vocabulary lacks
    raises ``OutOfVocabularyError`` (a ``ValueError``). ``method``: ``"greedy"`` (one continuation),
    ``"beam"`` (``budget`` beams, most likely first) or ``"sampling"`` (``budget`` samples, top-k
    ``top_k`` and nucleus ``top_p`` filtered, in draw order; duplicates kept). ``max_tokens``: tokens
    generated at most (an end-of-sequence token stops earlier). Each continuation is its decoded words
    joined by single spaces, without the prefix. Deterministic for a fixed ``seed`` (an integer >= 0).
    A bare string as ``prefixes`` is refused: it would be read as one prefix per character.
    """
    if isinstance(prefixes, (str, bytes)):
        raise TypeError(f"prefixes must be a list of prefixes, got the string {prefixes!r:.60} (it would generate "
                        f"from each of its {len(prefixes)} characters); fix: pass a list, e.g. "
                        f"prefixes=[{prefixes!r:.60}]")
    check_seed(seed)
    gen = generator_for(generator, tokenizer)
    encoded = [gen.encode_prefix(_words(p, f"prefixes[{i}]")) for i, p in enumerate(prefixes)]
    ids = generate(gen, encoded, method=method, budget=budget, max_tokens=max_tokens, seed=seed, top_k=top_k,
                   top_p=top_p)
    return [[" ".join(gen.decode(c)) for c in rows] for rows in ids]
