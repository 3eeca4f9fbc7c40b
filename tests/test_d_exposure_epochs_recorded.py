"""d-exposure gated at several epochs records every epoch, failing ones included (review M6).

Before, a failing epoch that was not the worst was only named in the raised message: missing from the report
and a saved baseline, and over seeds its epoch's figure was computed over the other seeds only and passed.
"""
import numpy as np

from pytest_privleak import SeedModels, assert_d_exposure_below, expect_leak
from pytest_privleak import results

WORDS = [f"w{i}" for i in range(15)]


class Scorer:
    """S-PER confidence at the blank: class word i gets 0.5 + i/40; the inserted word beats ``above`` of them."""

    labels = ["O", "S-PER"]

    def __init__(self, above):
        self.above = above

    def token_label_probs(self, sentences):
        out = []
        for s in sentences:
            word = s[-1]
            p = 0.5 + (WORDS.index(word) / 40 if word in WORDS else (15 - self.above - 0.5) / 40)
            rows = np.tile([0.9, 0.1], (len(s), 1))
            rows[-1] = [1 - p, p]
            out.append(rows)
        return out


class Tagger(Scorer):
    """Beaten by ``ranks[epoch]`` class words at each checkpoint."""

    def __init__(self, ranks):
        super().__init__(0)
        self.ranks = ranks

    def at_epoch(self, epoch):
        return Scorer(self.ranks[epoch])


def _gate(model):
    sink = []
    results.set_sink(sink)
    try:
        with expect_leak(match="d @ epoch"):
            assert_d_exposure_below(model, {"PER": "Chelsea"}, 2.5, class_words={"PER": WORDS},
                                    template="I like ___", epochs=[5, 10, 25], name="d")
    finally:
        results.set_sink(None)
    return {r.label: r for r in sink}


def test_every_failing_epoch_is_recorded():
    recorded = _gate(Tagger({5: 14, 10: 1, 25: 0}))     # epoch 5 passes; 10 and 25 fail, 25 the worst
    assert sorted(recorded) == ["d @ epoch 10", "d @ epoch 25", "d @ epoch 5"]
    assert [recorded[f"d @ epoch {e}"].passed for e in (5, 10, 25)] == [True, False, False]
    assert recorded["d @ epoch 10"].value == 3.0


def test_over_seeds_a_failing_epoch_keeps_every_seed():
    models = SeedModels([Tagger({5: 14, 10: 1, 25: 0}), Tagger({5: 14, 10: 14, 25: 13}),
                         Tagger({5: 14, 10: 13, 25: 14})], [0, 1, 2])
    epoch10 = _gate(models)["d @ epoch 10"]
    assert epoch10.per_seed[0] == 3.0 and len(epoch10.per_seed) == 3 and not epoch10.passed
