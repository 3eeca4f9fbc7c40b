"""time_budget, the progress line, and the same-seed reproducibility warning of the LDP auditor (issue 12)."""
import time
import warnings

import numpy as np
import pytest
from helpers_ldp import GlobalRandom

from pytest_privleak import expect_leak
from pytest_privleak.ldp import KRR, OUE, LDPAuditWarning, assert_ldp_holds, audit
from pytest_privleak.ldp.budget import AuditClock


class SlowKRR(KRR):
    """k-RR that takes 20 µs a row, as a slow user mechanism would."""

    def __call__(self, inputs, rng):
        time.sleep(2e-5 * len(np.asarray(inputs)))
        return super().__call__(inputs, rng)


SEARCH = dict(train_samples=2_000, val_samples=5_000)


def test_budget_spent_stops_the_final_estimate_and_says_so():
    # 4 x 10^6 final rows at 20 µs would take 80 s; the budget is 4 s
    with pytest.warns(LDPAuditWarning, match=r"time budget of 4 s spent: .*of 1,000,000 samples per input"):
        res = assert_ldp_holds(SlowKRR(3, 1.0), 1.0, time_budget=4, progress=None, allow_inconclusive=True,
                               **SEARCH)
    assert res.target["seconds"] < 4 + 8  # the budget, overshot by at most a round of chunks on a loaded machine
    assert res.passed  # accepted by name (allow_inconclusive=True); the result says on how little
    assert "accepted (allow_inconclusive=True)" in res.evidence["inconclusive"]
    done = res.target["samples"]
    assert 1_000 <= done < 1_000_000 and res.target["samples_requested"] == 1_000_000
    assert res.target["complete"] is False
    assert "rests on less evidence than asked" in res.evidence["budget"] and "raise time_budget" in res.evidence["budget"]
    assert res.ceiling < np.log(1_000_000 / 3.7)  # the interval is as wide as the samples drawn make it
    assert "budget" in res.explain()


def test_budget_still_fails_a_leak_it_can_see():
    with pytest.warns(LDPAuditWarning, match="time budget"):
        with expect_leak() as info:
            assert_ldp_holds(SlowKRR(3, 3.0), 1.0, time_budget=4, progress=None, **SEARCH)
    assert info.value.result.value > 1.0 and "budget" in info.value.result.evidence


def test_no_budget_no_warning_and_complete():
    with warnings.catch_warnings():
        warnings.simplefilter("error", LDPAuditWarning)
        res = audit(KRR(3, 1.0), samples=20_000, progress=None, **SEARCH)
    assert res.complete and res.samples == res.samples_requested == 20_000


def test_progress_line_reports_samples_done_total_and_eta(capsys):
    audit(KRR(3, 1.0), samples=20_000, progress=0, **SEARCH)
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("privleak ldp [KRR(k=3, epsilon=1)]")]
    assert len(lines) >= 3
    assert any("final estimate" in ln for ln in lines)
    last = lines[-1]
    assert "samples (" in last and "% )" not in last and "elapsed, ETA" in last
    done, total = last.split(": ")[2].split(" samples")[0].replace(",", "").split("/")
    assert int(done) == int(total)  # the plan matches what was drawn


def test_progress_is_silent_on_short_runs(capsys):
    audit(KRR(3, 1.0), samples=20_000, **SEARCH)  # default: a line every 5 s once the run is that long
    assert "privleak ldp" not in capsys.readouterr().err


def test_clock_prints_eta_from_the_rate():
    class Lines(list):
        def write(self, text):
            self.append(text)

        def flush(self):
            pass

    out = Lines()
    clock = AuditClock("m", progress=0, stream=out)
    clock.plan(1000)
    clock.started -= 10.0  # 10 s elapsed, 250 of 1000 done: 30 s to go
    clock.advance(250, "final estimate")
    text = "".join(out)
    assert "final estimate: 250/1,000 samples (25%), 10 s elapsed, ETA 30 s" in text


def test_mechanism_ignoring_its_rng_is_warned_about():
    with pytest.warns(LDPAuditWarning, match=r"GlobalRandom.*same rng seed.*fix: draw every random number from `rng`"):
        audit(GlobalRandom(), samples=10_000, progress=None, **SEARCH)


@pytest.mark.parametrize("mech", [KRR(3, 1.0), OUE(4, 1.0)])
def test_built_in_mechanisms_are_reproducible(mech):
    with warnings.catch_warnings():
        warnings.simplefilter("error", LDPAuditWarning)
        audit(mech, samples=10_000, progress=None, **SEARCH)
