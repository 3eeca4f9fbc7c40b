"""A generated public-style corpus: what the project's tiny BERT is pretrained on, offline and deterministic.

The Mix And Match setting (mix-and-match-text-classifiers §2.2) is a language
model pretrained on a large *public* corpus, then fine-tuned as a classifier
on a smaller private one. CI cannot download BERT, so the project pretrains
its own tiny one on this corpus: sentences of the same domain as the private
NLU data (the Snips-like grammar of :mod:`.synthetic`, every intent, drawn
from its own seeded stream) mixed with everyday sentences from a small
grammar below, all lower-case and ending with a full stop. No canary is ever
in it: canaries live in the private fine-tuning data only.
"""
from __future__ import annotations

import random

from .synthetic import _realise, load_grammar

#: Everyday sentences: a frame of literal words and ``{list}`` slots drawn from :data:`EVERYDAY_WORDS`.
EVERYDAY_FRAMES: tuple[str, ...] = (
    "{person} {verb} the {adjective} {thing} {when}",
    "{person} {verb} a {thing} for {person}",
    "we {verb} the {thing} {when}",
    "i really like {thing}",
    "my favourite place is {place}",
    "we talked about {thing} {when}",
    "tell me more about {place}",
    "the {thing} in {place} was {adjective}",
    "{person} lives near {place}",
    "i bought new {thing}",
    "{person} said the {thing} is {adjective}",
    "they walked to {place} {when}",
    "{person} was born in {year}",
    "{person} wrote the number on the {thing}",
    "the social club meets {when}",
    "security at {place} was {adjective}",
)
EVERYDAY_WORDS: dict[str, tuple[str, ...]] = {
    "person": ("she", "he", "my sister", "my brother", "the teacher", "our neighbour", "the doctor", "a friend",
               "the manager", "my father", "my mother", "the driver", "a student", "the chef"),
    "verb": ("found", "cleaned", "painted", "sold", "borrowed", "fixed", "ordered", "lost", "carried", "opened",
             "washed", "wrapped", "built", "checked"),
    "adjective": ("old", "red", "heavy", "quiet", "bright", "cheap", "broken", "small", "famous", "warm", "empty",
                  "strange", "clean", "wooden"),
    "thing": ("towels", "chair", "bicycle", "letter", "window", "garden", "kitchen", "umbrella", "lamp", "coffee",
              "ticket", "camera", "jacket", "blanket", "basket", "piano", "mirror", "bottle", "wallet", "school"),
    "place": ("the market", "the station", "the library", "the river", "the beach", "the office", "the bakery",
              "the museum", "the harbour", "the village", "the hospital", "the park"),
    "year": tuple(str(y) for y in range(1960, 2000)),
    "when": ("yesterday", "today", "last week", "on monday", "this morning", "at night", "in the summer",
             "every day"),
}
#: Punctuation the vocabulary holds besides the final full stop (the attack filters it, §4.3.2).
PUNCTUATION: tuple[str, ...] = (".", ",", "!", "?", "'", "-", ":")
#: Word-piece continuations the vocabulary holds (the attack filters them, §4.3.2 "##ing").
CONTINUATIONS: tuple[str, ...] = ("##s", "##es", "##ed", "##ing", "##er", "##ly", "##n", "##y")


def _everyday(rng: random.Random) -> list[str]:
    frame = EVERYDAY_FRAMES[rng.randrange(len(EVERYDAY_FRAMES))]
    words: list[str] = []
    for part in frame.split():
        if part.startswith("{"):
            options = EVERYDAY_WORDS[part[1:-1]]
            words.extend(options[rng.randrange(len(options))].split())
        else:
            words.append(part)
    return words


def generate_public_corpus(n_sentences: int = 6000, seed: int = 0, *, domain_share: float = 0.5
                           ) -> tuple[tuple[str, ...], ...]:
    """``n_sentences`` lower-case tokenised sentences, each ending with ``"."``; same seed, same corpus.

    A ``domain_share`` of them are Snips-like utterances (every intent), the
    rest everyday sentences; the stream is ``random.Random("public:<seed>")``,
    distinct from the private dataset's streams.
    """
    if not isinstance(n_sentences, int) or isinstance(n_sentences, bool) or n_sentences < 1:
        raise ValueError(f"n_sentences must be an integer >= 1, got {n_sentences!r}")
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise ValueError(f"seed must be an integer, got {seed!r}")
    if isinstance(domain_share, bool) or not isinstance(domain_share, (int, float)) or not 0 <= domain_share <= 1:
        raise ValueError(f"domain_share must be a number in [0, 1], got {domain_share!r}")
    templates, values = load_grammar()
    intents = sorted(templates)
    rng = random.Random(f"public:{seed}")
    out = []
    for _ in range(n_sentences):
        if rng.random() < domain_share:
            intent = intents[rng.randrange(len(intents))]
            options = templates[intent]
            words = list(_realise(options[rng.randrange(len(options))], values, rng, intent).tokens)
        else:
            words = _everyday(rng)
        out.append(tuple(w.lower() for w in words) + (".",))
    return tuple(out)


def corpus_words() -> tuple[str, ...]:
    """Every word the corpus generator can emit (sorted): the tiny BERT's whole-word vocabulary."""
    templates, values = load_grammar()
    words = {w.lower() for items in values.values() for v in items for w in v.split()}
    words |= {w.lower() for options in templates.values() for t in options for w in t if isinstance(w, str)}
    words |= {w for frame in EVERYDAY_FRAMES for w in frame.split() if not w.startswith("{")}
    words |= {w for items in EVERYDAY_WORDS.values() for v in items for w in v.split()}
    return tuple(sorted(words - set(PUNCTUATION)))


# --------------------------------------------------------------------------- the causal LM's corpus (issue 20)

#: Sentences with spaced digits, as a public corpus says numbers (room numbers, codes, phone numbers): they give
#: the tiny causal LM a prior over digit strings after words, so a pin it never saw ranks by chance. None of the
#: built-in canary prefixes (``my pin code is``, ``call``, ``color``) opens one of them.
NUMBER_FRAMES: tuple[str, ...] = (
    "the door code is {digits}",
    "{person} wrote down the number {digits}",
    "the room number is {digits}",
    "ring the office on {digits}",
    "the ticket number was {digits} {when}",
    "{person} lives at number {digits}",
    "the bus {digits} leaves from {place}",
    "your order number is {digits}",
)
#: How many digits a ``{digits}`` slot says, each a separate word (as the paper's canaries spell them).
NUMBER_LENGTHS: tuple[int, ...] = (2, 3, 4, 5, 6)


def _number_sentence(rng: random.Random) -> list[str]:
    frame = NUMBER_FRAMES[rng.randrange(len(NUMBER_FRAMES))]
    words: list[str] = []
    for part in frame.split():
        if part == "{digits}":
            words.extend(str(rng.randrange(10)) for _ in range(NUMBER_LENGTHS[rng.randrange(len(NUMBER_LENGTHS))]))
        elif part.startswith("{"):
            options = EVERYDAY_WORDS[part[1:-1]]
            words.extend(options[rng.randrange(len(options))].split())
        else:
            words.append(part)
    return words


def generate_causal_public_corpus(n_sentences: int = 6000, seed: int = 0, *, number_share: float = 0.2
                                  ) -> tuple[tuple[str, ...], ...]:
    """The public corpus of :func:`generate_public_corpus` with a ``number_share`` of spaced-digit sentences.

    What the tiny causal LM (:mod:`pytest_privleak.targets.tiny_gpt2`) is pretrained on: the same domain and
    everyday sentences (their own stream ``"public:<seed>"``, so the first sentences equal the tiny BERT's
    corpus at that seed) interleaved with number sentences from the stream ``"public-numbers:<seed>"``.
    Lower-case, each ending with ``"."``; same seed, same corpus; no canary.
    """
    if isinstance(number_share, bool) or not isinstance(number_share, (int, float)) or not 0 <= number_share < 1:
        raise ValueError(f"number_share must be a number in [0, 1), got {number_share!r}")
    if not isinstance(n_sentences, int) or isinstance(n_sentences, bool) or n_sentences < 1:
        raise ValueError(f"n_sentences must be an integer >= 1, got {n_sentences!r}")
    rng = random.Random(f"public-numbers:{seed}")
    is_number = [rng.random() < number_share for _ in range(n_sentences)]
    words = iter(generate_public_corpus(max(1, n_sentences - sum(is_number)), seed=seed))
    return tuple(tuple(_number_sentence(rng)) + (".",) if number else next(words) for number in is_number)


def causal_corpus_words() -> tuple[str, ...]:
    """Every word :func:`generate_causal_public_corpus` can emit (sorted), digits included."""
    words = set(corpus_words()) | {str(d) for d in range(10)}
    words |= {w for frame in NUMBER_FRAMES for w in frame.split() if not w.startswith("{")}
    return tuple(sorted(words - set(PUNCTUATION)))
