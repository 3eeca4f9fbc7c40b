"""Several canaries per model (issue 37): the set, its injection, and every canary figure over it."""
import math

import numpy as np
import pytest
import torch

from pytest_privleak import expect_leak
from pytest_privleak.attacks.exposure.assertion import assert_exposure_below, measure_exposure
from pytest_privleak.attacks.exposure.canary_set import exact_members, skip_members
from pytest_privleak.attacks.cea.assertion import measure_cea
from pytest_privleak.attacks.over_canaries import crossed_components
from pytest_privleak.canaries import (SET_SIZE, CanarySet, canary, set_size, inject_canaries,
                                      make_pattern)
from pytest_privleak.data import Utterance, generate_snips_like
from pytest_privleak.data.types import NLUDataset

PIN = make_pattern("pin", 4)


def test_a_set_draws_distinct_secrets_and_starts_with_the_single_canary():
    pins = canary("pin", seed=3, count=8)
    assert isinstance(pins, CanarySet) and len(pins) == 8
    assert len({c.secret for c in pins}) == 8
    assert pins[0] == canary("pin", seed=3)                       # the same draw, continued
    assert canary("pin", seed=3, count=8) == pins                 # deterministic
    assert pins.label == "8 pin canaries: my pin code is _ _ _ _"  # names no secret: stable across seeds
    assert pins.fingerprint() != canary("pin", seed=4, count=8).fingerprint()
    assert pins.secret_numbers[0] == int("".join(pins[0].secret))  # a pin's number is its digits
    assert canary("pin", seed=3, count=1) == canary("pin", seed=3)  # count=1: one canary, not a set


def test_the_set_size_leaves_references_in_small_spaces():
    assert set_size(PIN) == SET_SIZE == 8
    assert set_size(make_pattern("pin", 3)) == 8              # 1000 secrets: 125 per canary
    assert set_size(make_pattern("pin", 2)) == 1              # 100 secrets: one canary


@pytest.mark.parametrize("kwargs, fragment", [
    ({"count": 0}, "count must be an integer >= 1"),
    ({"count": 10 ** 4}, "would fill its space of 10000"),
    ({"secret": "1 2 3 4", "count": 3}, "secret= names one canary, but count=3"),
])
def test_bad_counts_name_the_fix(kwargs, fragment):
    with pytest.raises(ValueError, match=fragment):
        canary("pin", **kwargs)


def test_a_set_refuses_repeats_and_mixed_patterns():
    a, b = canary("pin", secret="1 2 3 4"), canary("call", secret="1 2 3 4")
    with pytest.raises(ValueError, match=r"canaries\[1\] repeats the secret of canaries\[0\]"):
        CanarySet((a, a))
    with pytest.raises(ValueError, match="one pattern"):
        CanarySet((a, b))


def test_injection_says_each_canary_r_times_and_refuses_collisions():
    data = generate_snips_like(n_train=60, n_valid=10, n_test=10, seed=0)
    pins = canary("pin", seed=0, count=4)
    injected = inject_canaries(data, pins, repeats=10)
    for pin in pins:
        assert sum(u.tokens == pin.tokens for u in injected.train + injected.valid) == 10
    with pytest.raises(ValueError, match=r"canaries\[1\] .* repeats canaries\[0\]"):
        inject_canaries(data, [pins[0], pins[0]], repeats=2)
    said = NLUDataset((*data.train, pins[2].utterance), data.valid, data.test, name="said")
    with pytest.raises(ValueError, match=r"canaries\[2\] \('my pin code is .*'\) is already in the dataset 'said': "
                                         r"train\[60\]"):
        inject_canaries(said, pins, repeats=2)


def test_skip_members_by_hand():
    # members {2, 3} of a space of 6: the non-members 0, 1, 4, 5 are numbered 0..3
    assert skip_members(np.arange(4), np.array([3, 2])).tolist() == [0, 1, 4, 5]
    assert skip_members(np.arange(3), np.array([0, 5, 1])).tolist() == [2, 3, 4]


def test_exact_members_rank_each_among_the_non_members():
    # space of 8; members 1 and 6 both score lowest (memorised)
    scores = np.array([5.0, 0.0, 3.0, 3.0, 4.0, 2.0, 0.0, 7.0])
    one, six = exact_members(scores, np.array([1, 6]))
    # each is ranked among itself and the 6 non-members: rank 1 of 7, exposure log2 7 (not log2 8 - log2 2)
    assert one.rank == six.rank == 1 and one.value == pytest.approx(math.log2(7))
    assert one.ceiling == pytest.approx(math.log2(7))
    # members 2 and 6: member 2 scores 3; at or below it among the non-members 0, 1, 3, 4, 5, 7: secrets 1 (0),
    # 3 (3, a tie counts against it) and 5 (2): rank 4, exposure log2 7 - 2
    member_of_middle = exact_members(scores, np.array([2, 6]))[0]
    assert member_of_middle.rank == 4 and member_of_middle.value == pytest.approx(math.log2(7) - 2)


class PlantedScorer:
    """A sequence scorer whose loss is 0 for the planted secrets and ``1 + number / 10^4`` otherwise."""

    def __init__(self, planted):
        self.planted = {tuple(p.split()) for p in planted}

    def score(self, utterances):
        return np.array([0.0 if u.tokens[4:] in self.planted else 1.0 + int("".join(u.tokens[4:])) / 1e4
                         for u in utterances])


def test_exposure_of_a_set_is_the_mean_over_members_each_among_the_non_members():
    pins = CanarySet(tuple(canary("pin", secret=s) for s in ("0 0 0 1", "9 9 9 9", "0 0 0 0")))
    scorer = PlantedScorer(["0 0 0 1", "9 9 9 9"])           # two members memorised, "0 0 0 0" not
    result = measure_exposure(scorer, pins)
    top = math.log2(10 ** 4 - 2)                             # rank 1 of the 9998 secrets that are not other members
    # "0 0 0 0" scores 1.0, below every other non-member: rank 1 too; the planted members are left out of its rank
    assert result.per_canary == ((pytest.approx(top), pytest.approx(top), pytest.approx(top)),)
    zero_rank_with_members = measure_exposure(scorer, canary("pin", secret="0 0 0 0"))
    assert zero_rank_with_members.value == pytest.approx(math.log2(10 ** 4) - math.log2(3))   # alone: rank 3
    assert result.value == pytest.approx(top) and result.label == "3 pin canaries: my pin code is _ _ _ _"
    assert result.extra["canary_count"] == 3 and result.extra["worst_canary"] == pytest.approx(top)
    assert "3 distinct secrets of pattern 'pin'" in result.evidence["canaries"]
    assert result.target["canary_set"] == pins.fingerprint()


def test_a_never_memorised_member_pulls_the_mean_down_and_the_worst_stays_named():
    pins = CanarySet(tuple(canary("pin", secret=s) for s in ("0 0 0 1", "5 0 0 0")))
    result = measure_exposure(PlantedScorer(["0 0 0 1"]), pins)
    # "5 0 0 0" scores 1.5: below it the 5000 non-members 0000..4999 less the member 0001 (4999): rank 5000
    low = math.log2(9999) - math.log2(5000)
    assert result.per_canary[0][1] == pytest.approx(low)
    assert result.value == pytest.approx((math.log2(9999) + low) / 2)
    # the worst (highest) one, its given secret redacted (a secret= may be the team's own)
    assert "reads 13.288 ('my pin code is <pin " in result.evidence["canaries"]
    assert "0 0 0 1" not in result.evidence["canaries"]
    with expect_leak(match=r"2 pin canaries"):
        assert_exposure_below(PlantedScorer(["0 0 0 1"]), pins, max_bits=4.0)


def test_one_canary_says_it_is_the_worst_case_and_how_to_compare_branches():
    result = measure_exposure(PlantedScorer(["0 0 0 1"]), canary("pin", secret="0 0 0 1"))
    assert result.evidence["canaries"].startswith("one canary ('my pin code is <pin ")       # given: redacted
    assert "0 0 0 1" not in result.evidence["canaries"] and "the worst case of one" in result.evidence["canaries"]
    assert "canary('pin', count=8)" in result.evidence["canaries"]
    assert result.per_canary == ()


class MultiPlanted:
    """SoftInputModel whose loss is the squared distance to the NEAREST of several planted sentences."""

    def __init__(self, planted, dim=8):
        from pytest_privleak.canaries import DIGITS

        self.vocabulary = ("my", "pin", "code", "is") + DIGITS
        self._w = torch.randn(len(self.vocabulary), dim, generator=torch.Generator().manual_seed(0))
        index = {t: i for i, t in enumerate(self.vocabulary)}
        self._planted = torch.stack([torch.tensor([index[t] for t in ("my", "pin", "code", "is", *p.split())])
                                     for p in planted])

    def input_embeddings(self):
        return self._w

    def loss_from_embeddings(self, embeddings, intents, tags):
        targets = self._w[self._planted]                                  # [P, L, d]
        return ((embeddings.unsqueeze(1) - targets.unsqueeze(0)) ** 2).sum(dim=(2, 3)).min(dim=1).values


def test_cea_on_a_set_attacks_each_member_among_the_non_members():
    planted = ["7 0 3 9", "1 1 2 2", "5 6 0 0"]
    pins = CanarySet(tuple(canary("pin", secret=s) for s in (*planted, "4 4 4 4")))
    result = measure_cea(MultiPlanted(planted), pins)
    # every planted member is the lowest loss once the other members are left out; "4 4 4 4" was never planted
    assert result.extra["correct"] == 3 and result.extra["n_trials"] == 4 and result.value == 0.75
    assert result.per_canary == ((1.0, 1.0, 1.0, 0.0),)
    assert result.label == "4 pin canaries: my pin code is _ _ _ _"
    # the same canaries as a plain list: each guess is the single lowest loss of the space, one planted secret
    listed = measure_cea(MultiPlanted(planted), list(pins))
    assert listed.extra["correct"] == 1


def test_crossed_components_by_hand():
    # rows (seeds) 0, 2; columns (canaries) 0, 4: y = [[0, 4], [2, 6]]: grand 3, row means 2, 4, column means 1, 5;
    # residual 0; MS_seed = 2 * (1 + 1) / 1 = 4, MS_canary = 2 * (4 + 4) / 1 = 16, MS_resid = 0
    # s_seed^2 = 4 / 2 = 2, s_canary^2 = 16 / 2 = 8; Var(mean) = 2/2 + 8/2 + 0 = 5 = (4 + 16 - 0) / 4
    c = crossed_components([[0.0, 4.0], [2.0, 6.0]])
    assert (c.mean, c.seed, c.canary, c.residual, c.variance) == (3.0, 2.0, 8.0, 0.0, 5.0)
    # Satterthwaite: 5^2 / ((4/4)^2 / 1 + (16/4)^2 / 1) = 25 / 17
    assert c.df == pytest.approx(25 / 17)
    # one seed: the t interval over the canaries (s^2 = 8, Var = 8 / 2 = 4, 1 df)
    one = crossed_components([[0.0, 4.0]])
    assert (one.variance, one.df) == (4.0, 1.0)
    # no seed or canary effect beyond the residual: the components are cut at 0 and Var = MS_resid / (k m)
    flat = crossed_components([[0.0, 1.0], [1.0, 0.0]])
    assert flat.seed == flat.canary == 0.0 and flat.residual == 1.0 and flat.variance == 0.25 and flat.df == 1.0


def test_over_seeds_a_set_is_judged_on_the_crossed_bound():
    from pytest_privleak.attacks.over_seeds import aggregate
    from pytest_privleak.results import LeakResult

    rows = [(1.0, 3.0), (2.0, 4.0), (1.5, 3.5)]
    members = [LeakResult("exposure", "exposure_bits", sum(r) / 2, threshold=3.0, ceiling=13.29, label="pins",
                          per_canary=(r,), target={"canary_set": "x"}) for r in rows]
    agg = aggregate(members, [0, 1, 2])
    c = crossed_components(rows)
    _, _, upper = c.bounds(0.95)
    assert agg.per_seed == (2.0, 3.0, 2.5) and agg.per_canary == tuple(rows)
    assert agg.value == pytest.approx(upper) and not agg.passed and agg.extra["worst_cell"] == 4.0
    assert "variance components over 3 seeds x 2 canaries" in agg.evidence["over seeds"]
    # the canary term widens the bound beyond a t interval over the three seed means
    from pytest_privleak.attacks.over_seeds import t_summary
    assert upper > t_summary([2.0, 3.0, 2.5]).upper


FIXTURE_TEST = """
from pytest_privleak.canaries import Canary, CanarySet


def test_the_fixture_draws_one_canary_unless_told(canary):
    # one canary alone in its template is the worst case an absolute limit needs: canaries of one template
    # interfere (the joint tagger, a pin said twice: 13.29 bits alone, 5.5-6.7 bits as one of 8)
    pin = canary("pin")
    assert isinstance(pin, Canary) and pin == canary("pin", count=1)
    pins = canary("pin", count=8)
    assert isinstance(pins, CanarySet) and len(pins) == 8 and pins[0] == pin
    assert isinstance(canary("pin", secret="4 8 2 1"), Canary)
    assert len(canary("color", count=3)) == 3
"""


def test_the_canary_fixture_draws_one_unless_told(pytester):
    pytester.makepyfile(test_fixture=FIXTURE_TEST)
    assert pytester.runpytest_subprocess("-p", "no:cacheprovider").ret == 0


def test_a_rate_over_seeds_is_pooled_unless_the_canaries_disagree():
    from pytest_privleak.attacks.over_seeds import aggregate
    from pytest_privleak.results import LeakResult

    def member(row):
        hits = sum(row)
        return LeakResult("cea", "accuracy", hits / len(row), threshold=0.5, ceiling=1.0, label="pins",
                          extra={"correct": float(hits), "n_trials": float(len(row))}, per_canary=(tuple(row),))

    # the same canary (of 4) extracted by every seed, the others never: 7 of 28 pooled, but the canaries differ
    # far more than 7 trials each explain (chi-square), so the interval widens to the crossed one
    stuck = aggregate([member((1.0, 0.0, 0.0, 0.0)) for _ in range(7)], list(range(7)))
    assert stuck.extra["pooled_successes"] == 7 and stuck.extra["pooled_trials"] == 28
    assert "widened" in stuck.evidence["over seeds"] and stuck.per_canary[0] == (1.0, 0.0, 0.0, 0.0)
    # one success per seed, a different canary each time: homogeneous, the exact pooled interval stands
    spread = aggregate([member(tuple(float(j == i % 4) for j in range(4))) for i in range(7)], list(range(7)))
    assert "widened" not in spread.evidence["over seeds"] and "Clopper-Pearson" in spread.evidence["over seeds"]


class PlantedGenerator:
    """A TokenGenerator over the digits 0-9: a digit that continues a planted secret gets 0.9 of the mass
    (shared among such digits), every other digit shares the rest."""

    eos_id = None
    vocab_size = 10

    def __init__(self, planted):
        self.planted = [tuple(int(d) for d in p.split()) for p in planted]

    def encode_prefix(self, words):
        return []

    def encode_words(self, words):
        return [[int(w)] for w in words]

    def decode(self, ids):
        return [str(i) for i in ids]

    def _log_probs(self, state):
        rows = []
        for done in state:
            done = list(done)
            hot = {p[len(done)] for p in self.planted if len(done) < len(p) and p[:len(done)] == tuple(done)}
            probs = torch.full((10,), 0.1 / max(10 - len(hot), 1))
            for d in hot:
                probs[d] = 0.9 / len(hot)
            rows.append(torch.log(probs / probs.sum()))
        return torch.stack(rows)

    def start(self, prefixes):          # a row is the digits said so far (the prefix encodes to nothing)
        state = [list(row) for row in prefixes]
        return self._log_probs(state), state

    def step(self, state, tokens):
        state = [row + [int(t)] for row, t in zip(state, torch.as_tensor(tokens).view(-1).tolist())]
        return self._log_probs(state), state

    def select(self, state, rows):
        return [state[int(r)] for r in torch.as_tensor(rows).view(-1).tolist()]


def test_extraction_of_a_set_looks_for_each_member_among_the_non_member_guesses():
    from pytest_privleak.attacks.extraction.assertion import measure_extraction

    planted = ["1 2 3 4", "5 6 7 8"]
    pins = CanarySet(tuple(canary("pin", secret=s) for s in (*planted, "9 9 9 0")))
    result = measure_extraction(PlantedGenerator(planted), pins, samples=1)
    # one guess each: the most likely secret that is not another member is the member itself when planted
    assert result.extra["extracted"] == 2 and result.extra["canaries"] == 3
    assert result.per_canary == ((1.0, 1.0, 0.0),) and result.label == "3 pin canaries: my pin code is _ _ _ _"
    listed = measure_extraction(PlantedGenerator(planted), list(pins), samples=1)   # a plain list: one guess in all
    assert listed.extra["extracted"] == 1
