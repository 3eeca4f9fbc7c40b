"""Every figure that is a share of counted trials is pooled over seeds with Clopper-Pearson (review M1).

Planted case, by hand: one trial per seed, 7 seeds, only seed 6 succeeds, so the pooled rate is 1/7. The one-sided
95 % Clopper-Pearson upper bound u of 1/7 solves P(X <= 1 | n=7, u) = 0.05, i.e. (1-u)^7 + 7u(1-u)^6 = 0.05:
u = 0.5207 (check: (0.4793)^7 = 0.005813, 7 * 0.5207 * 0.4793^6 = 0.044182, sum 0.049995). A Student t bound over
the 7 per-seed figures (mean 1/7, s = 0.378, t_{6,0.95} = 1.943) is 1/7 + 1.943 * 0.378 / sqrt(7) = 0.4204 and
passes a limit of 0.5 that the pooled bound fails.
"""
import pytest

from pytest_privleak.canaries import canary
from pytest_privleak.attacks.extraction.attack import CanaryExtraction, ExtractionMeasurement
from pytest_privleak.attacks.extraction.assertion import extraction_result
from pytest_privleak.attacks.over_seeds import aggregate
from pytest_privleak.attacks.extraction.pii.attack import PiiAudit, PiiItem, PiiItemFigure
from pytest_privleak.attacks.extraction.pii.assertion import extraction_result as pii_extraction_result

SEEDS = list(range(7))
HITS = [0, 0, 0, 0, 0, 0, 1]
CP_UPPER_1_OF_7 = 0.5207
T_UPPER = 0.4204


def _extraction(hit: int):
    c = CanaryExtraction("my pin is 1 2 3 4", "1 2 3 4", ["1 2 3 4"] if hit else ["9 9 9 9"], 1 if hit else None,
                         budget=10, space_size=10_000)
    return extraction_result(object(), canary("pin", secret="1 2 3 4"), ExtractionMeasurement("greedy", "asked", [c]),
                             confidence=0.95, name="pin")


def _pii(hit: int):
    item = PiiItem("phone", "555 0101", 3, 0, 10, 18, 0)
    audit = PiiAudit([PiiItemFigure(item, "<phone>", None, bool(hit), 0.001)], ["phone"], 5)
    return pii_extraction_result(object(), ["call me on 555 0101"], audit, threshold=0.5, confidence=0.95,
                                 name="tickets")


def _with_limit(result, limit):
    from dataclasses import replace
    return replace(result, threshold=limit)


@pytest.mark.parametrize("build", [_extraction, _pii], ids=["extraction_rate", "pii_extracted_share"])
def test_counted_rate_over_seeds_is_pooled_clopper_pearson_and_fails_where_a_t_bound_would_pass(build):
    members = [_with_limit(build(h), 0.5) for h in HITS]
    agg = aggregate(members, SEEDS)
    assert "Clopper-Pearson, pooled over 7 seeds (1/7)" in agg.evidence["over seeds"]
    assert agg.value == pytest.approx(CP_UPPER_1_OF_7, abs=1e-4) and agg.value > T_UPPER
    assert not agg.passed  # the t bound (0.42) passed this limit of 0.5 before
    assert agg.extra["mean"] == pytest.approx(1 / 7)


@pytest.mark.parametrize("build", [_extraction, _pii], ids=["extraction_rate", "pii_extracted_share"])
def test_counted_rate_with_no_success_in_any_seed_meets_a_zero_limit_on_the_counts(build):
    members = [_with_limit(build(0), 0.0) for _ in SEEDS]
    agg = aggregate(members, SEEDS)
    assert agg.passed and agg.value == 0.0
    assert "0 of 7 trials over 7 seeds succeeded (no seed)" in agg.explain()


def _keyword(hit: int):
    from pytest_privleak.embeddings.keyword_assertion import _result
    from pytest_privleak.embeddings.keywords import KeywordFigure, KeywordMeasurement

    figure = KeywordFigure("hand", hit, 1, 0.5, (0.0, 1.0), "")
    m = KeywordMeasurement("white-box", "svm", [figure], hit, 1, (0.0, 1.0), 0.95, 10)
    return _result(object(), m, None, "kw", None)


def _inversion(hit: int):
    from pytest_privleak.embeddings.inversion import InversionMeasurement, SubAttackFigure
    from pytest_privleak.embeddings.inversion_assertion import _results

    figure = SubAttackFigure("digit", hit, hit, 1, 0.1, 0.5, (0.0, 1.0), (0.0, 1.0))
    return _results(object(), InversionMeasurement("pin", [figure], [], 10, 1, 1, 0.95), with_top5=False,
                    name="inv")[0]


@pytest.mark.parametrize("build", [_keyword, _inversion], ids=["keyword_accuracy", "inversion_top1"])
def test_embedding_rates_over_seeds_are_pooled_too(build):
    agg = aggregate([_with_limit(build(h), 0.5) for h in HITS], SEEDS)
    assert "Clopper-Pearson, pooled over 7 seeds (1/7)" in agg.evidence["over seeds"]
    assert agg.value == pytest.approx(CP_UPPER_1_OF_7, abs=1e-4) and not agg.passed


def test_membership_tpr_over_seeds_is_pooled_too():
    # seed 6 gives one member the lowest loss of all: 1 of 10 members found at 1 % FPR, 0 in the other seeds
    import numpy as np

    from pytest_privleak.attacks.membership.attack import membership_inference
    from pytest_privleak.attacks.membership.assertion import _auc_result, _tpr_result
    from pytest_privleak.data.types import Utterance

    class Table:
        def __init__(self, losses):
            self.losses = losses

        def score(self, utterances):
            return np.array([self.losses[u] for u in utterances])

    members = [Utterance((f"m{i}",), ("O",), "x") for i in range(10)]
    non_members = [Utterance((f"n{i}",), ("O",), "x") for i in range(100)]
    results = []
    for hit in HITS:
        losses = {u: 5.0 + i / 100 for i, u in enumerate(non_members)}
        losses.update({u: 9.0 for u in members})
        if hit:
            losses[members[0]] = 0.0
        scorer = Table(losses)
        m = membership_inference(scorer, members, non_members, method="loss")
        results.append(_with_limit(_tpr_result(_auc_result(scorer, m, None, "t", None), m, 0.01), 0.5))
    assert [r.extra["successes"] for r in results] == [0, 0, 0, 0, 0, 0, 1]
    agg = aggregate(results, SEEDS)
    assert "Clopper-Pearson, pooled over 7 seeds (1/70)" in agg.evidence["over seeds"]


def test_seeds_that_disagree_widen_the_pooled_bound_to_the_t_bound():
    # six seeds extract 0 of 100 canaries, one 50 of 100: pooled Clopper-Pearson alone gave 0.090 and passed
    # a limit of 0.1; the seeds disagree (chi-square homogeneity p << 0.05), so the t bound 0.21 applies
    from pytest_privleak.attacks.over_seeds import seeds_disagree
    from pytest_privleak.results import LeakResult

    def rate(hits):
        return LeakResult("extraction", "extraction_rate", hits / 100, threshold=0.1, direction="at_most",
                          ceiling=1.0, extra={"successes": float(hits), "trials": 100.0}, label="pins")

    agg = aggregate([rate(h) for h in (0, 0, 0, 0, 0, 0, 50)], SEEDS)
    assert not agg.passed and agg.value == pytest.approx(0.2103, abs=1e-3)
    assert "widened to the Student t interval" in agg.evidence["over seeds"]
    assert seeds_disagree([(0, 100)] * 6 + [(50, 100)])
    assert not seeds_disagree([(1, 10), (2, 10)]) and not seeds_disagree([(0, 10)] * 3)
