"""A Snips-like corpus with a real-sized vocabulary and digits in several intents (issue 21 experiments).

The bundled grammar's templates, plus digit templates in four intents; entity value lists are extended
with generated pseudo-word names (each value drawn uniformly from a long list, so most word types are seen
once or a few times, as in real NLU corpora). Deterministic for a seed.
"""
import random
from pytest_privleak.data.synthetic import _realise, load_grammar, reserve_unseen
from pytest_privleak.data.types import NLUDataset

ONSETS = ("b", "br", "c", "ch", "d", "f", "g", "gr", "h", "j", "k", "l", "m", "n", "p", "r", "s", "sh", "st", "t",
          "tr", "v", "w", "z")
VOWELS = ("a", "e", "i", "o", "u", "ai", "ou", "ee")
CODAS = ("", "", "n", "r", "l", "s", "k", "m", "nd", "st")
ENTITY_LISTS = ("artist", "album", "track", "playlist", "object_name", "movie_name", "restaurant_name", "city",
                "entity_name", "location_name", "served_dish", "cuisine")
DIGIT = ("digit",)
EXTRA_TEMPLATES = {
    "BookRestaurant": ["book a table for {party_size_number=digit} at {restaurant_name} at {digit} {digit} pm",
                       "call {restaurant_name} on {digit} {digit} {digit} {digit} to book for {party_size_number=digit}"],
    "RateBook": ["rate {object_name} {rating_value=digit} out of {best_rating=digit}",
                 "give chapter {digit} {digit} of {object_name} {rating_value=digit} stars"],
    "PlayMusic": ["play track {digit} {digit} from {album}", "play the top {digit} {digit} songs of {year_digits}"],
    "SearchScreeningEvent": ["find showtimes for {movie_name} at {digit} {digit} pm",
                             "is {movie_name} playing in room {digit} {digit}"],
}


def _word(rng):
    return "".join(rng.choice(ONSETS) + rng.choice(VOWELS) + rng.choice(CODAS) for _ in range(rng.randint(1, 3)))


def big_grammar(seed: int, names_per_list: int):
    templates, values = load_grammar()
    templates = {k: list(v) for k, v in templates.items()}
    values = dict(values)
    rng = random.Random(f"issue21-big:{seed}")
    for name in ENTITY_LISTS:
        extra = {" ".join(_word(rng) for _ in range(rng.randint(1, 2))) for _ in range(names_per_list)}
        values[name] = tuple(values[name]) + tuple(sorted(extra))
    values["digit"] = tuple(str(d) for d in range(10))
    values["year_digits"] = tuple(" ".join(str(y)) for y in range(1950, 2025))
    for intent, texts in EXTRA_TEMPLATES.items():
        for text in texts:
            parts = []
            for word in text.split():
                if word.startswith("{"):
                    slot, _, src = word[1:-1].partition("=")
                    parts.append((slot, src or slot))
                else:
                    parts.append(word)
            templates[intent].append(tuple(parts))
    return {k: tuple(v) for k, v in templates.items()}, values


def _split(n, seed, split, templates, values):
    rng = random.Random(f"issue21-big:{seed}:{split}")
    intents = sorted(templates)
    out = []
    for _ in range(n):
        intent = intents[rng.randrange(len(intents))]
        options = templates[intent]
        out.append(_realise(options[rng.randrange(len(options))], values, rng, intent))
    return tuple(out)


def generate_big(n_train: int, seed: int = 0, names_per_list: int = 600, unseen_share: float = 0.3):
    templates, values = big_grammar(seed, names_per_list)
    train_values = reserve_unseen(values, unseen_share, seed)
    n_small = max(n_train // 8, 50)
    splits = [_split(n, seed, s, templates, train_values if s == "train" else values)
              for s, n in (("train", n_train), ("valid", n_small), ("test", n_small))]
    return NLUDataset(*splits, name=f"issue21-big(seed={seed}, n={n_train})")


if __name__ == "__main__":
    import sys
    from collections import Counter
    d = generate_big(int(sys.argv[1]))
    c = Counter(t for u in d.train for t in u.tokens)
    print(len(d.train), "types", len(c), "singletons", sum(v == 1 for v in c.values()),
          "digits", {k: c[k] for k in "0123456789"})
    print([" ".join(u.tokens) for u in d.train[:8]])
