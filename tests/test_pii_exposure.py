"""PII exposure and extraction: hand-derived figures on fake scorers, redaction, the report, and end to end."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from pytest_privleak.attacks.extraction.pii.attack import audit_pii
from pytest_privleak.attacks.extraction.pii.assertion import (assert_pii_exposure_below, assert_pii_extraction_at_most,
                                                            measure_pii_exposure, measure_pii_extraction)
from pytest_privleak.data.pii_detectors import AddressDetector, NameListDetector
from pytest_privleak.results import expect_leak

NAMES = NameListDetector(["anna", "ravi"], ["berg", "shah"])
TEXTS = ["the holder is anna berg", "the holder is anna berg", "deliver to 4 1 7 maple lane today",
         "my order arrived damaged"]


class HammingScorer:
    """Score = how many house-number digits differ from ``417``, plus 0 for "anna berg" and 1 for other names.

    ``sign=-1`` makes the true items the least likely of their spaces (a model that memorised nothing useful).
    """

    def __init__(self, sign: float = 1.0):
        self.sign = sign
        self.calls = 0

    def score(self, utterances):
        self.calls += 1
        out = []
        for u in utterances:
            text = u.text
            if "maple lane" in text:
                digits = text.split("to ")[1].split(" maple")[0].split()
                out.append(sum(a != b for a, b in zip(digits, "417")))
            else:
                out.append(0.0 if "anna berg" in text else 1.0)
        return self.sign * np.asarray(out, dtype=np.float64)


class FlatScorer:
    """Every sentence alike: ties count against the item, so nothing is exposed."""

    def score(self, utterances):
        return np.ones(len(utterances))


def detectors():
    return [NAMES, AddressDetector()]


def test_exact_exposure_and_extraction_match_hand_derived_values():
    audit = audit_pii(HammingScorer(), TEXTS, detectors(), show_pii=True)
    by_text = {f.item.text: f for f in audit.figures}
    name, address = by_text["anna berg"], by_text["4 1 7 maple lane"]
    # names: 2 x 2 candidates, the item alone at score 0 -> rank 1, exposure log2 4 = 2 bits
    assert (name.item.count, name.exposure.method, name.exposure.rank) == (2, "exact", 1)
    assert name.exposure.value == pytest.approx(2.0) and name.extracted and name.extraction_chance == 0.25
    # address: 10^3 house numbers, only 417 at distance 0 -> rank 1, exposure log2 1000
    assert address.exposure.space_size == 1000 and address.exposure.rank == 1
    assert address.exposure.value == pytest.approx(math.log2(1000)) and address.extracted


def test_least_likely_and_flat_models_show_no_exposure_and_extract_nothing():
    for model in (HammingScorer(sign=-1.0), FlatScorer()):
        audit = audit_pii(model, TEXTS, detectors())
        assert [f.exposure.value for f in audit.figures] == [0.0, 0.0]
        assert [f.exposure.rank for f in audit.figures] == [4, 1000]      # last of its space (ties against)
        assert not any(f.extracted for f in audit.figures)


def test_context_prefix_cuts_the_ticket_after_the_item():
    seen = []

    class Recorder(HammingScorer):
        def score(self, utterances):
            seen.extend(u.text for u in utterances)
            return super().score(utterances)

    audit_pii(Recorder(), TEXTS[2:3], [AddressDetector()], context="prefix")
    assert seen[0].startswith("deliver to ") and all(s.endswith("maple lane") for s in seen)
    seen.clear()
    audit_pii(Recorder(), TEXTS[2:3], [AddressDetector()])
    assert all(s.endswith("maple lane today") for s in seen)


def test_large_spaces_are_sampled_and_extrapolated_deterministically():
    texts = ["call me at 5 5 5 0 1 4 2 7 7 3 please"]

    class Digits:
        def score(self, utterances):
            target = "5 5 5 0 1 4 2 7 7 3".split()
            return np.array([sum(a != b for a, b in zip(u.tokens[3:13], target)) + 0.01 * int(u.tokens[3])
                             for u in utterances], dtype=np.float64)

    one = audit_pii(Digits(), texts, "phone", references=256, show_pii=True)
    two = audit_pii(Digits(), texts, "phone", references=256, show_pii=True)
    e = one.figures[0].exposure
    assert (e.method, e.space_size, e.n_references, e.rank) == ("extrapolated", 10 ** 10, 256, 1)
    assert e.value == two.figures[0].exposure.value and e.value > math.log2(256)
    assert one.figures[0].extraction_chance == pytest.approx(1 / 257)


def test_results_redact_the_pii_by_default_and_show_it_on_request():
    result = measure_pii_exposure(HammingScorer(), TEXTS, detectors())
    text = json.dumps(result.to_json())
    assert "anna berg" not in text and "4 1 7" not in text and "<name " in text and "len=9>" in text
    assert result.metric == "max_exposure_bits" and result.value == pytest.approx(math.log2(1000))
    assert result.threshold is None and result.label == "PII in training texts"
    shown = measure_pii_exposure(HammingScorer(), TEXTS, detectors(), show_pii=True, name="tickets")
    assert "anna berg" in json.dumps(shown.to_json()) and shown.label == "tickets"
    # the keyed hash is stable for the same data and salt, and changes with the salt
    again = measure_pii_exposure(HammingScorer(), TEXTS, detectors())
    salted = measure_pii_exposure(HammingScorer(), TEXTS, detectors(), salt="ci-secret")
    assert again.evidence["items"] == result.evidence["items"] != salted.evidence["items"]


def test_extraction_share_has_its_interval_and_chance():
    result = measure_pii_extraction(HammingScorer(), TEXTS, detectors())
    assert result.value == 1.0 and result.extra == {"extracted": 2.0, "items": 2.0}
    lo, hi = result.interval
    assert hi == 1.0 and lo == pytest.approx(0.025 ** 0.5, abs=1e-9)      # Clopper-Pearson, k = n = 2, 95 %
    assert result.chance == pytest.approx((1 / 4 + 1 / 1000) / 2)
    assert result.evidence["audited"] == "2 of 2 item(s) extracted"


def test_assertions_fail_on_a_memorising_model_and_pass_on_one_that_memorised_nothing():
    with expect_leak(match=r"pii_extraction.extracted_share .* violates") as leak:
        assert_pii_extraction_at_most(HammingScorer(), TEXTS, 0.0, detectors())
    assert "remedy" in str(leak.value) and "anna berg" not in str(leak.value)
    with expect_leak(match="max_exposure_bits"):
        assert_pii_exposure_below(HammingScorer(), TEXTS, 5.0, detectors())
    assert assert_pii_extraction_at_most(HammingScorer(sign=-1.0), TEXTS, 0.0, detectors()).passed
    assert assert_pii_exposure_below(FlatScorer(), TEXTS, 1.0, detectors()).passed


def test_min_count_audits_only_the_items_seen_that_often():
    audit = audit_pii(HammingScorer(), TEXTS, detectors(), min_count=2, show_pii=True)
    assert [f.item.text for f in audit.figures] == ["anna berg"]


REPORT_SUITE = '''
from pathlib import Path

import numpy as np
from pytest_privleak.attacks.extraction.pii.assertion import assert_pii_extraction_at_most


class Memorised:
    """Knows the one phone number of the tickets (score 0), everything else is unlikely."""

    def __init__(self, tickets):
        self.known = set(tickets)

    def score(self, utterances):
        return np.array([0.0 if u.text in self.known else 5.0 for u in utterances])


def test_phone_leaks():
    tickets = Path(__file__).with_name("tickets.txt").read_text().splitlines()
    assert_pii_extraction_at_most(Memorised(tickets), tickets, 0.0, ["phone"])
'''


def test_the_json_report_never_holds_the_planted_phone_number(pytester):
    phone = "555-014-2773"
    pytester.makefile(".txt", tickets=f"please call me back at {phone} soon\nmy order arrived damaged")
    pytester.makepyfile(test_suite=REPORT_SUITE)
    result = pytester.runpytest_subprocess("--privleak-report=rep")
    result.assert_outcomes(failed=1)
    report = (pytester.path / "rep" / "report.json").read_text()
    leak = json.loads(report)["tests"][0]["results"][0]
    assert "pii_extraction.extracted_share" in leak["key"] and leak["verdict"] == "FAIL"
    assert "<phone " in report
    written = {p.name: p.read_text(errors="replace") for p in (pytester.path / "rep").rglob("*") if p.is_file()}
    for digits in (phone, phone.replace("-", ""), "014-2773"):
        assert not any(digits in text for text in written.values()), digits
        assert digits not in result.stdout.str()


@pytest.mark.slow
def test_lstm_lm_extracts_the_most_repeated_pii_and_a_model_without_it_does_not(one_torch_thread):
    """Lukas et al. 2023 §5 end to end: the items said 20 times fail the gate; a model trained without them passes."""
    from pytest_privleak.data.synthetic_pii import generate_pii_corpus
    from pytest_privleak.targets import train_target

    corpus = generate_pii_corpus(0, repeats=(1, 20), items_per_repeat=4, kinds=("phone", "name", "address"),
                                 n_background=300, n_valid=40)
    leaking = train_target("lstm-lm", corpus.dataset, progress=False)
    control = train_target("lstm-lm", corpus.without(corpus.repeated(20)), progress=False)
    options = dict(detectors=corpus.detectors(), min_count=20, references=512, name="PII said 20 times")
    with expect_leak(match="extracted_share"):
        assert_pii_extraction_at_most(leaking, corpus.dataset, 0.25, **options)
    assert_pii_extraction_at_most(control, corpus.dataset, 0.25, **options)
    leak = measure_pii_exposure(leaking, corpus.dataset, **options)
    clean = measure_pii_exposure(control, corpus.dataset, **options)
    assert leak.extra["mean_exposure"] > clean.extra["mean_exposure"] + 5.0
