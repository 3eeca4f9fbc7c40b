"""Canary patterns exactly as canary-extraction-nlu Appendix A, chance figures, and 9:1 injection."""
from collections import Counter

import pytest

from pytest_privleak.canaries import (COLORS, PATTERNS, canary, custom_pattern, inject_canaries, make_pattern,
                                      split_repeats)
from pytest_privleak.data import Utterance, generate_snips_like

APPENDIX_A = {  # name: (text with n=4 secret, tags, intent)
    "call": ("call 1 2 3 4", "O B-canary I-canary I-canary I-canary", "CallIntent"),
    "pin": ("my pin code is 1 2 3 4", "O O O O B-canary I-canary I-canary I-canary", "PinIntent"),
    "color": ("color red green lilac blue", "O B-canary I-canary I-canary I-canary", "ColorIntent"),
}


@pytest.mark.parametrize("name", sorted(APPENDIX_A))
def test_patterns_match_appendix_a(name):
    text, tags, intent = APPENDIX_A[name]
    secret = text.split()[-4:]
    c = canary(name, secret=secret)
    assert c.text == text and c.tags == tuple(tags.split()) and c.intent == intent
    assert c.utterance == Utterance(tuple(text.split()), tuple(tags.split()), intent)
    assert c.prefix_len == len(text.split()) - 4


def test_vocabularies():
    assert PATTERNS["pin"].vocabulary == PATTERNS["call"].vocabulary == tuple("0123456789")
    assert COLORS == ("red", "green", "lilac", "blue", "yellow", "brown",
                      "cyan", "magenta", "orange", "pink", "purple", "mauve")
    assert PATTERNS["color"].vocabulary == COLORS


@pytest.mark.parametrize("n", [4, 6, 8, 10])
def test_lengths_tag_one_b_and_n_minus_one_i(n):
    c = canary("call", length=n, seed=5)
    assert len(c.secret) == n and c.tags == ("O", "B-canary") + ("I-canary",) * (n - 1)


def test_chance_figures_by_hand():
    assert make_pattern("pin", 4).chance_accuracy == pytest.approx(1e-4)
    assert make_pattern("pin", 4).chance_hdt == pytest.approx(0.9)
    assert make_pattern("color", 4).chance_hdt == pytest.approx(0.9167, abs=5e-5)
    assert make_pattern("color", 4).chance_accuracy == pytest.approx(4.82e-5, rel=1e-3)  # paper, Table 2
    assert make_pattern("call", 10).space_size == 10**10
    assert make_pattern("color", 6).space_size == 12**6


def test_seeded_secret_is_deterministic_and_varies():
    assert canary("pin", seed=3) == canary("pin", seed=3)
    secrets = {canary("pin", seed=s).secret for s in range(10)}
    assert len(secrets) == 10
    all_digits = Counter(t for s in range(200) for t in canary("pin", seed=s).secret)
    assert set(all_digits) == set("0123456789") and min(all_digits.values()) > 50  # roughly uniform, 800 draws


def test_explicit_secret_validation():
    assert canary("pin", secret="9 9 1 2").secret == ("9", "9", "1", "2")
    assert canary("pin", secret=("1",) * 6).pattern.length == 6
    with pytest.raises(ValueError, match=r"secret token 2 \('x'\) is not in the vocabulary V0 of pattern 'pin'.*'0'"):
        canary("pin", secret=("1", "x", "2", "3"))
    with pytest.raises(ValueError, match="length=4 but secret"):
        canary("pin", length=4, secret=("1", "2"))


def test_unknown_pattern_lists_known_names():
    with pytest.raises(ValueError, match="unknown canary pattern 'zip'; known: call, pin, color"):
        make_pattern("zip")


def test_custom_pattern():
    p = custom_pattern("zip", ("my", "zip", "is"), tuple("0123456789"), 5, "ZipIntent")
    assert p.prefix_tags == ("O", "O", "O") and make_pattern(p) is p and make_pattern(p, 6).length == 6
    c = canary(p, seed=1)
    assert c.tokens[:3] == ("my", "zip", "is") and len(c.secret) == 5 and c.intent == "ZipIntent"
    tagged = custom_pattern("to", ("send", "to", "bob"), ("a", "b"), 2, "Send", ("O", "O", "B-name"), slot="code")
    assert tagged.tags == ("O", "O", "B-name", "B-code", "I-code")


@pytest.mark.parametrize("kwargs, fragment", [
    ({"vocabulary": ("a",)}, "at least 2"),
    ({"vocabulary": ("a", "a", "b")}, "repeats"),
    ({"length": 0}, "length must be an integer >= 1"),
    ({"prefix_tags": ("O",)}, "prefix_tags has 1 tags for 2"),
    ({"prefix_tags": ("O", "I-x")}, "follows 'O'"),
    ({"prefix": "my pin"}, "not the string"),
    ({"intent": "Two words"}, "intent"),
])
def test_custom_pattern_validation(kwargs, fragment):
    args = {"name": "p", "prefix": ("my", "pin"), "vocabulary": ("a", "b"), "length": 2, "intent": "I", **kwargs}
    with pytest.raises(ValueError, match=fragment):
        custom_pattern(**args)


@pytest.mark.parametrize("repeats, train, valid", [(100, 90, 10), (10, 9, 1), (1, 1, 0), (500, 450, 50), (5, 5, 0)])
def test_split_repeats(repeats, train, valid):
    assert split_repeats(repeats) == (train, valid)


@pytest.fixture(scope="module")
def base():
    return generate_snips_like(300, 40, 40, seed=0)


@pytest.mark.parametrize("repeats, train, valid", [(100, 90, 10), (10, 9, 1)])
def test_injection_counts(base, repeats, train, valid):
    pin = canary("pin", seed=0)
    d = inject_canaries(base, pin, repeats=repeats)
    assert sum(u == pin.utterance for u in d.train) == train
    assert sum(u == pin.utterance for u in d.valid) == valid
    assert d.test == base.test and d.sizes["train"] == 300 + train and d.sizes["valid"] == 40 + valid
    assert "pin:" in d.name and f"x{repeats}" in d.name and "PinIntent" in d.intents
    originals = [u for u in d.train if u != pin.utterance]
    assert originals == list(base.train)  # original order kept


def test_injection_is_deterministic_and_shuffled(base):
    cs = [canary("pin", seed=1), canary("color", seed=2)]
    a, b = inject_canaries(base, cs, 20, seed=7), inject_canaries(base, cs, 20, seed=7)
    assert a == b and a.content_hash() == b.content_hash()
    assert inject_canaries(base, cs, 20, seed=8).train != a.train
    positions = [i for i, u in enumerate(a.train) if u in {c.utterance for c in cs}]
    assert len(positions) == 36 and positions[-1] - positions[0] > 100  # spread, not appended


def test_injection_rejects_bad_input(base):
    with pytest.raises(ValueError, match="no canaries"):
        inject_canaries(base, [])
    with pytest.raises(TypeError, match=r"canaries\[0\]"):
        inject_canaries(base, ["my pin code is 1 2 3 4"])
    with pytest.raises(ValueError, match="repeats must be an integer >= 1"):
        inject_canaries(base, canary(), repeats=0)


def test_injection_remembers_the_pattern_tokens_for_the_vocabulary(base):
    """Issue 12: V0 tokens the corpus never says must reach the target's vocabulary; the dataset carries them."""
    acct = custom_pattern("acct", ["account"], ["alpha", "beta", "gamma"], 2, "AcctIntent")
    once = inject_canaries(base, canary(acct, secret=["beta", "gamma"]), repeats=10)
    assert once.canary_tokens == ("account", "alpha", "beta", "gamma")
    twice = inject_canaries(once, canary("pin", seed=0), repeats=10)
    assert set(twice.canary_tokens) == {"account", "alpha", "beta", "gamma", "my", "pin", "code", "is",
                                        *"0123456789"}
    assert twice.replace(name="renamed").canary_tokens == twice.canary_tokens


def test_remembered_tokens_are_part_of_the_content_hash(base):
    """They change the trained model's vocabulary, so the cache must not mix the two datasets up."""
    injected = inject_canaries(base, canary("pin", seed=0), repeats=10)
    plain = type(base)(injected.train, injected.valid, injected.test, name=injected.name)
    assert plain.train == injected.train and plain.content_hash() != injected.content_hash()
    assert injected.replace(canary_tokens=()).content_hash() == plain.content_hash()
