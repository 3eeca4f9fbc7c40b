"""Secrets from the team's data stay out of messages, reports and baselines (issue 34 item 2).

A secret the team wrote (``string_pattern``, ``custom_pattern``, ``canary(..., secret=...)``) and every guess
of it are shown as ``<pattern hash len=N>``; a canary the library drew stays readable;
``--privleak-show-secrets`` shows them. The stub scorer below ranks the secret first, so a failing
exposure needs no training.
"""
from __future__ import annotations

import json
import re

import numpy as np
import pytest

from pytest_privleak import expect_leak, measure_cea, measure_exposure
from pytest_privleak.attacks import redaction
from pytest_privleak.attacks.extraction.attack import _outcome
from pytest_privleak.canaries import canary, custom_pattern, string_pattern

HIDDEN = re.compile(r"<(\S+) ([0-9a-f]{8}) len=(\d+)>")


@pytest.fixture
def redacting():
    previous = redaction.set_show_secrets(False)
    yield
    redaction.set_show_secrets(previous)


@pytest.fixture
def showing():
    previous = redaction.set_show_secrets(True)
    yield
    redaction.set_show_secrets(previous)


def account_pattern():
    return string_pattern("account", "my account is {secret}", intent="AccountIntent",
                          secrets=[f"acct-{n:03d}" for n in range(64)])


class Memorised:
    """A sequence scorer that has memorised ``secret``: its sentence scores 0, every other sentence 1 + a bit."""

    def __init__(self, secret: str) -> None:
        self.secret = secret

    def score(self, utterances):
        return np.array([0.0 if u.tokens[-1] == self.secret else 1.0 + (sum(map(ord, u.tokens[-1])) % 7) / 10
                         for u in utterances])


# --- which secrets are the team's --------------------------------------------------------------------------


def test_a_drawn_canary_of_a_built_in_pattern_is_not_a_team_secret_and_every_other_one_is():
    assert not redaction.is_team_secret(canary("pin", 4, seed=1))
    assert not redaction.is_team_secret(canary("color", 6, seed=2))
    assert redaction.is_team_secret(canary("pin", secret="7 3 1 9"))                 # given: maybe a real pin
    assert redaction.is_team_secret(canary(account_pattern(), secret="acct-007"))
    assert redaction.is_team_secret(canary(account_pattern(), seed=3))              # drawn, but from their data
    own = custom_pattern("pin", ("my", "pin", "code", "is"), tuple("0123456789"), 4, "OtherIntent")
    assert redaction.is_team_secret(canary(own, seed=1))                           # a built-in name, not its pattern


def test_a_team_secret_shows_its_prefix_then_kind_keyed_hash_and_length(redacting, monkeypatch):
    monkeypatch.delenv(redaction.KEY_ENV, raising=False)
    secret = canary("pin", secret="7 3 1 9")
    shown = redaction.shown_text(secret)
    kind, tag, length = HIDDEN.search(shown).groups()
    assert shown.startswith("my pin code is <") and (kind, length) == ("pin", "4")
    assert "7 3 1 9" not in shown
    assert redaction.shown_text(canary("pin", secret="7 3 1 9")) == shown        # stable: a label across runs
    assert redaction.shown_secret(secret, ("7", "3", "1", "9")) == redaction.shown_secret(secret)  # a right guess
    assert redaction.shown_secret(secret, ("7", "3", "1", "8")) != redaction.shown_secret(secret)
    monkeypatch.setenv(redaction.KEY_ENV, "a CI secret")
    assert HIDDEN.search(redaction.shown_text(secret)).group(2) != tag             # the key changes the hash
    assert redaction.redaction_tag([secret]) != redaction.redaction_tag([canary("pin", 4, seed=1)])


def test_a_drawn_canary_and_the_show_option_keep_the_text(redacting, showing):
    drawn = canary("pin", 4, seed=1)
    assert redaction.shown_text(drawn) == drawn.text
    assert redaction.redaction_note([drawn]) == {}
    given = canary("pin", secret="7 3 1 9")
    assert redaction.shown_text(given) == "my pin code is 7 3 1 9"               # --privleak-show-secrets
    assert redaction.redaction_note([given]) == {}


# --- the attacks' results ----------------------------------------------------------------------------------


def test_a_failing_exposure_of_a_string_secret_holds_no_clear_text(redacting):
    secret = canary(account_pattern(), secret="acct-042")
    with expect_leak(match="exposure"):
        from pytest_privleak import assert_exposure_below

        assert_exposure_below(Memorised("acct-042"), secret, 1.0)
    result = measure_exposure(Memorised("acct-042"), secret)
    text = json.dumps([result.label, result.evidence, result.explain()])
    assert "acct-042" not in text
    assert result.value == pytest.approx(6.0)                                    # log2 64: ranked first
    assert result.label.startswith("my account is <account ") and "redacted" in result.evidence["redaction"]


def test_a_drawn_canary_stays_readable_in_the_exposure_result(redacting):
    pin = canary("pin", 2, seed=1)
    result = measure_exposure(Memorised(pin.secret[-1]), pin)
    assert result.label == pin.text and result.evidence["canary"] == pin.text
    assert "redaction" not in result.evidence


def test_extraction_guesses_of_a_team_secret_are_redacted_and_a_right_one_shows_the_secrets_hash(redacting):
    secret = canary(account_pattern(), secret="acct-042")
    found = _outcome(secret, [("acct-041",), ("acct-042",)], budget=10)
    assert found.rank == 2
    assert "acct-04" not in json.dumps([found.canary, found.secret, found.guesses])
    assert found.guesses[1] == found.secret and found.guesses[0] != found.secret


def test_cea_truth_and_reconstructions_of_a_team_secret_are_redacted(redacting):
    from helpers_models import QuadraticModel
    from pytest_privleak.canaries import DIGITS

    secret = canary("pin", secret="7 3 1 9")
    leaky = QuadraticModel(("my", "pin", "code", "is") + DIGITS, {"PinIntent": ["my", "pin", "code", "is", "7", "3",
                                                                                "1", "9"]})
    result = measure_cea(leaky, secret, method="exhaustive")
    assert result.value == 1.0                                  # the exhaustive attack recovers the pin
    text = json.dumps([result.label, result.evidence, result.explain()])
    assert "7 3 1 9" not in text and "7319" not in text
    true = HIDDEN.search(result.evidence["true"]).group(0)
    assert result.evidence["reconstructed"] == [true]           # a right guess shows the secret's own hash


# --- through pytest: the message, the terminal table, the report and the baseline ---------------------------

PROJECT = '''
import numpy as np
from pytest_privleak import assert_exposure_below, string_pattern

SECRET = "-".join(["hotel", "xray", "9"])          # as a team's data holds it (not spelled in the source)
PATTERN = string_pattern("account", "my account is {secret}", intent="AccountIntent",
                         secrets=[SECRET] + [f"acct-{n:03d}" for n in range(63)])


class Memorised:
    def score(self, utterances):
        return np.array([0.0 if u.tokens[-1] == SECRET else 1.0 for u in utterances])


def test_account_number(canary):
    assert_exposure_below(Memorised(), canary(PATTERN, secret=SECRET), 1.0)


def test_generated_pin(canary):
    pin = canary("pin", 4, seed=1)
    class Pin:
        def score(self, utterances):
            return np.array([0.0 if u.tokens == pin.tokens else 1.0 for u in utterances])
    assert_exposure_below(Pin(), pin, 1.0)
'''


def test_the_message_table_report_and_baseline_of_a_failing_string_secret_hold_no_clear_text(pytester):
    from pytest_privleak.canaries import canary as make

    pytester.makepyfile(test_secret=PROJECT)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--privleak-report=out",
                                           "--privleak-save-baseline=baseline.json")
    result.assert_outcomes(failed=2)
    written = {p.name: p.read_text(encoding="utf-8") for p in [*(pytester.path / "out").iterdir(),
                                                               pytester.path / "baseline.json"]}
    assert {"report.json", "index.html", "summary.md", "baseline.json"} <= set(written)
    everything = {"output": result.stdout.str() + result.stderr.str(), **written}
    leaked = [name for name, text in everything.items() if "hotel-xray-9" in text]
    assert leaked == []
    out = everything["output"]
    assert re.search(r"my account is <account [0-9a-f]{8} len=12>", out)         # the message and the table
    pin = make("pin", 4, seed=1)
    assert pin.text in out and pin.text in written["report.json"]               # a generated canary stays readable
    assert "Redacted: 1 result(s)" in out and "Redacted: 1 result(s)" in written["index.html"]
    assert "Redacted: 1 result(s)" in written["summary.md"]
    assert json.loads(written["report.json"])["summary"]["redacted"] == 1



def test_the_option_and_the_ini_key_show_the_secrets_and_give_the_mode_back(pytester, redacting):
    config = pytester.parseconfigure("--privleak-show-secrets")
    assert redaction.shows_secrets()
    config._ensure_unconfigure()
    assert not redaction.shows_secrets()
    pytester.makeini("[pytest]\nprivleak_show_secrets = true\n")
    config = pytester.parseconfigure()
    assert redaction.shows_secrets()
    config._ensure_unconfigure()
    assert not redaction.shows_secrets()
