"""The routes of issue 36 that passed the gate by settings alone, end to end; each test names why it now fails.

A branch under review controls its tests, conftest.py and ini, not the workflow's command line or the
baseline artifact saved on main. Each route below ended in exit 0 before issue 36 (checked by running these
tests against the code before it); now each exits non-zero, and one line says why.
"""
from __future__ import annotations

import json

import pytest

pytest_plugins = ["pytester"]


@pytest.fixture
def clean_env(monkeypatch):
    monkeypatch.delenv("PRIVLEAK_CACHE_HMAC_KEY", raising=False)
    monkeypatch.delenv("PYTEST_ADDOPTS", raising=False)
    monkeypatch.delenv("PRIVLEAK_ROUTE", raising=False)
    return monkeypatch


def _run(pytester, *args):
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args)


def _main_then_branch(pytester, monkeypatch, route: str, *branch_args):
    """Save the baseline as main would (no route), then run the branch's route against it."""
    saved = _run(pytester, "--privleak-save-baseline=base.json")
    assert saved.ret == 0, saved.stdout.str()
    monkeypatch.setenv("PRIVLEAK_ROUTE", route)
    return _run(pytester, "--privleak-baseline=base.json", *branch_args)


LDP = '''
import os
from pytest_privleak import assert_ldp_holds
from pytest_privleak.ldp.mechanisms import KRR

ROUTE = os.environ.get("PRIVLEAK_ROUTE", "")


def test_encoder():
    true_epsilon = 1.0 if ROUTE else 0.5                      # the branch's encoder leaks twice as much
    options = {"samples": 50_000}
    if ROUTE == "weakened":
        options = {"samples": 1000, "confidence": 0.999999, "replicates": 50}
    elif ROUTE == "stronger":
        true_epsilon, options = 0.5, {"samples": 200_000}
    assert_ldp_holds(KRR(2, true_epsilon), 2.0, name="encoder", **options)
'''


def test_ldp_audited_with_fewer_samples_and_a_higher_confidence_is_weakened(pytester, clean_env):
    # before: eps_lcb 0.389 "improved", exit 0; now the weaker audit is refused before its figure is compared
    pytester.makepyfile(test_ldp=LDP)
    run = _main_then_branch(pytester, clean_env, "weakened")
    assert run.ret == pytest.ExitCode.USAGE_ERROR, run.stdout.str()
    run.stdout.fnmatch_lines(["  WEAKENED test_ldp.py::test_encoder ldp.epsilon_lcb [[]encoder[]]: confidence 0.95 -> "
                              "0.999999 (must be equal); replicates 2 -> 50 (must be equal); samples 50000 -> 1000 "
                              "(higher is stronger)"])
    assert "improved" not in run.stdout.str()
    clean_env.setenv("PRIVLEAK_ROUTE", "plain")                # without the options the leak is plainly caught
    assert _run(pytester, "--privleak-baseline=base.json").ret == pytest.ExitCode.TESTS_FAILED


def test_a_stronger_ldp_audit_under_the_same_key_is_compared_not_weakened(pytester, clean_env):
    pytester.makepyfile(test_ldp=LDP)
    run = _main_then_branch(pytester, clean_env, "stronger")
    assert run.ret == pytest.ExitCode.OK, run.stdout.str()
    run.stdout.fnmatch_lines(["privleak baseline gate passed: 1 result(s) compared with base.json*",
                              "*this run's audit is stronger than the baseline's (samples 50000 -> 200000)*"])


EXPOSURE = '''
import os
import torch
from pytest_privleak import assert_exposure_below
from pytest_privleak.canaries import canary
from pytest_privleak.targets.vocab import Vocabulary

PIN = canary("pin", 3, seed=4)
ROUTE = os.environ.get("PRIVLEAK_ROUTE", "")


class Ranked:
    """A stub language model that ranks the pin's secret `rank`-th of its 1,000 (lower score = likelier)."""

    def __init__(self, rank):
        tokens = (*PIN.pattern.prefix, *PIN.pattern.vocabulary)
        self.vocab = Vocabulary(("<pad>", "<unk>", *sorted(set(tokens))), ("<pad>", "<unk>"),
                                tuple(sorted(set(PIN.tags))), (PIN.intent,))
        self.secret = torch.tensor(self.vocab.token_ids(PIN.tokens, strict=True), dtype=torch.float64)
        self.rank = rank

    def score_token_ids(self, ids, intent, tags):
        weights = torch.tensor([0.0] * (ids.shape[1] - 3) + [1.0, 10.0, 100.0], dtype=torch.float64)
        spread = ((ids.double() * weights).sum(dim=1) * 0.6180339887) % 1.0 + 0.0001
        is_secret = (ids.double() == self.secret).all(dim=1)
        return torch.where(is_secret, torch.full_like(spread, (self.rank - 0.5) / 1000), spread)


def test_pin():
    model = Ranked(1 if ROUTE else 30)                 # the branch's model memorises the pin
    options = {"method": "sampled", "references": 16, "allow_inconclusive": True} if ROUTE == "weakened" else {}
    assert_exposure_below(model, PIN, 12.0, name="pin", **options)
'''


def test_a_sampled_exposure_accepted_as_inconclusive_is_weakened(pytester, clean_env):
    # before: capped at 4.00 bits (log2 of 16 references), "improved", exit 0; now the weaker audit is refused
    pytester.makepyfile(test_exposure=EXPOSURE)
    run = _main_then_branch(pytester, clean_env, "weakened")
    assert run.ret == pytest.ExitCode.USAGE_ERROR, run.stdout.str()
    run.stdout.fnmatch_lines(["  WEAKENED test_exposure.py::test_pin exposure.exposure_bits [[]pin[]]: "
                              "allow_inconclusive False -> True (lower is stronger); method 'exact' -> 'sampled' "
                              "(must be equal); references 4096 -> 16 (higher is stronger)"])
    report = json.loads((pytester.path / "base.json").read_text())
    [entry] = [r for t in report["tests"] for r in t["results"]]
    assert entry["audit"]["settings"]["method"] == "exact" and entry["audit"]["asked"] == {"method": "auto"}
    clean_env.setenv("PRIVLEAK_ROUTE", "plain")                # without the options the leak is plainly caught
    assert _run(pytester, "--privleak-baseline=base.json").ret == pytest.ExitCode.TESTS_FAILED


def test_a_figure_accepted_as_inconclusive_is_not_compared_even_under_the_baseline_s_own_settings(pytester,
                                                                                                  clean_env):
    # main itself accepted the capped figure: the same audit on both sides is still no measurement to compare
    pytester.makepyfile(test_exposure=EXPOSURE.replace('if ROUTE == "weakened" else {}', ''))
    run = _main_then_branch(pytester, clean_env, "weakened")
    assert run.ret == pytest.ExitCode.USAGE_ERROR, run.stdout.str()
    run.stdout.fnmatch_lines(["  INCONCLUSIVE test_exposure.py::test_pin exposure.exposure_bits [[]pin[]]: this run's "
                              "figure is inconclusive (the measurement was cut short by its budget and accepted "
                              "with allow_inconclusive=True)*",
                              "privleak baseline gate FAILED: nothing was compared: every result with a counterpart "
                              "in base.json is inconclusive"])


DP = '''
import os
import pytest_privleak.dp.assertion as dp_assertion
from pytest_privleak import assert_dp_training_holds
from pytest_privleak.dp.audit import Arm, DPAuditRun

ROUTE = os.environ.get("PRIVLEAK_ROUTE", "")


def stub_audit(train, dataset, epsilon, delta, *, threat_model, confidence, **options):
    """Stands for the DP-SGD trainings (minutes): the bound each threat model proves for each pipeline."""
    noise_div_10 = bool(ROUTE)                               # the branch divides the noise by ten
    bound = {"auto": 2.467 if noise_div_10 else 0.5, "black-box": 0.320}[threat_model]
    threat = "white-box" if threat_model == "auto" else threat_model
    return DPAuditRun([Arm(threat, "one-run", bound, confidence, {}, {}, True, "")], "stub", [], 0.1, claimed=epsilon)


dp_assertion.audit_dp_training = stub_audit


def train(dataset, seed=0):
    return None


def test_dp_sgd():
    options = {"threat_model": "black-box"} if ROUTE == "weakened" else {}
    assert_dp_training_holds(train, [], 2.0, 1e-5, build=lambda data: None, name="dp-sgd", **options)
'''


def test_a_dp_audit_moved_to_the_black_box_threat_model_is_refused(pytester, clean_env):
    # before: 0.320 against main's 0.5, "improved", exit 0; now the changed threat model is refused
    pytester.makepyfile(test_dp=DP)
    run = _main_then_branch(pytester, clean_env, "weakened")
    assert run.ret == pytest.ExitCode.USAGE_ERROR, run.stdout.str()
    run.stdout.fnmatch_lines(["  WEAKENED test_dp.py::test_dp_sgd dp-training.epsilon_lcb [[]dp-sgd[]]: threat_model "
                              "'auto' -> 'black-box' (must be equal)"])
    clean_env.setenv("PRIVLEAK_ROUTE", "plain")                # the default audit fails the branch on its own
    assert _run(pytester, "--privleak-baseline=base.json").ret == pytest.ExitCode.TESTS_FAILED


SUITE = '''
import os
import pytest
from pytest_privleak.results import LeakResult, PrivacyLeakError, record

AUC = float(os.environ.get("PRIVLEAK_TEST_AUC", "0.5"))
LABEL = os.environ.get("PRIVLEAK_TEST_LABEL", "scorer")


def membership(label, value):
    result = record(LeakResult("membership", "auc", value, threshold=0.95, label=label))
    if not result.passed:
        raise PrivacyLeakError(result)


def test_control():
    membership("control", 0.5)


def test_scorer():
    if os.environ.get("PRIVLEAK_TEST_SKIP"):
        pytest.skip("the branch skips its leaking test")
    if os.environ.get("PRIVLEAK_TEST_SWALLOW"):
        try:
            membership(LABEL, AUC)
        except PrivacyLeakError:
            pass                                             # the test swallows its own leak
        return
    membership(LABEL, AUC)
'''


@pytest.fixture
def suite(pytester, clean_env):
    """A membership scorer whose AUC rises 0.50 -> 0.87 on the branch (under its own 0.95 limit: only the gate can
    catch it), with main's baseline (base.json) and main's report folder (main-rep/)."""
    pytester.makepyfile(test_suite=SUITE)
    clean_env.setenv("PRIVLEAK_TEST_AUC", "0.50")
    saved = _run(pytester, "--privleak-save-baseline=base.json", "--privleak-report=main-rep")
    assert saved.ret == 0, saved.stdout.str()
    clean_env.setenv("PRIVLEAK_TEST_AUC", "0.87")
    return pytester


@pytest.mark.parametrize("vouched", [False, True])
def test_merge_reports_from_the_ini_addopts_are_refused(suite, vouched):
    # before: no test ran, the committed report's figures were gated: "gate passed", exit 0; now a usage error,
    # also when a conftest sets PYTEST_ADDOPTS at import to make the option look like the workflow's
    (suite.path / "forged").mkdir()
    (suite.path / "forged" / "report.json").write_text((suite.path / "main-rep" / "report.json").read_text())
    if vouched:
        suite.makeconftest("import os\nos.environ['PYTEST_ADDOPTS'] = '--privleak-merge-reports forged'\n")
    suite.makeini("[pytest]\naddopts = --privleak-merge-reports forged\n")
    run = _run(suite, "--privleak-baseline=base.json")
    assert run.ret == pytest.ExitCode.USAGE_ERROR, run.stdout.str()
    run.stderr.fnmatch_lines(["*--privleak-merge-reports forged comes from the ini's addopts*"])


@pytest.mark.parametrize("option", ["--fixtures", "--help", "--markers"])
def test_an_ini_option_that_replaces_the_test_run_fails_a_gated_run(suite, option):
    # before: exit 0 (with --fixtures the terminal even said "gate FAILED"); now the gate never decided: exit 4
    suite.makeini(f"[pytest]\naddopts = {option}\n")
    run = _run(suite, "--privleak-baseline=base.json")
    assert run.ret == pytest.ExitCode.USAGE_ERROR, run.stdout.str()
    said = run.stdout.str() + run.stderr.str()   # --fixtures collects, so the gate decides "nothing was compared"
    assert ("privleak: the run was asked to gate on --privleak-baseline=base.json but the gate never compared "
            "anything" in said) or "privleak baseline gate FAILED: nothing was compared" in said


def test_a_signed_baseline_edited_and_gated_without_its_key_is_refused(suite, clean_env):
    # before: the edit went unseen and no line said the signature was unchecked, exit 0; now exit 4
    clean_env.setenv("PRIVLEAK_CACHE_HMAC_KEY", "k" * 32)
    clean_env.setenv("PRIVLEAK_TEST_AUC", "0.50")
    assert _run(suite, "--privleak-save-baseline=signed.json").ret == 0
    data = json.loads((suite.path / "signed.json").read_text())
    [scorer] = [r for t in data["tests"] for r in t["results"] if r["label"] == "scorer"]
    scorer["value"] = 0.9                                      # the branch edits main's figure
    (suite.path / "edited.json").write_text(json.dumps(data))
    clean_env.delenv("PRIVLEAK_CACHE_HMAC_KEY")
    clean_env.setenv("PRIVLEAK_TEST_AUC", "0.87")
    run = _run(suite, "--privleak-baseline=edited.json")
    assert run.ret == pytest.ExitCode.USAGE_ERROR, run.stdout.str()
    run.stderr.fnmatch_lines(["*privleak baseline edited.json is signed, but PRIVLEAK_CACHE_HMAC_KEY is not set here*"])
    # the workflow, and only the workflow, may accept it unverified
    suite.makeini("[pytest]\naddopts = --privleak-unsigned-ok\n")
    assert _run(suite, "--privleak-baseline=edited.json").ret == pytest.ExitCode.USAGE_ERROR
    suite.makeini("[pytest]\n")
    accepted = _run(suite, "--privleak-baseline=edited.json", "--privleak-unsigned-ok")
    assert accepted.ret == pytest.ExitCode.OK, accepted.stdout.str()
    accepted.stdout.fnmatch_lines(["  note: edited.json is signed but was read unverified*"])


CONFTEST_ROUTES = {
    "the baseline option cleared": '''
def pytest_configure(config):
    config.option.privleak_baseline = None
''',
    "the collector unregistered": '''
import pytest

@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    config.pluginmanager.unregister(name="privleak-collector")
''',
    "the exit status reset": '''
import pytest

@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session):
    session.exitstatus = 0
''',
    "PYTEST_ADDOPTS set at import": '''
import os
os.environ["PYTEST_ADDOPTS"] = "--privleak-allow-missing"
''',
}


@pytest.mark.parametrize("route", sorted(CONFTEST_ROUTES))
def test_conftest_code_that_an_in_process_check_can_see_fails_the_gated_run(suite, clean_env, route):
    # before: exit 0 for each; now the gate's verdict holds (exit 1 for the regression, or 4: it never decided)
    suite.makeconftest(CONFTEST_ROUTES[route])
    if route == "PYTEST_ADDOPTS set at import":   # the ini asks to excuse the skipped test, the conftest vouches
        suite.makeini("[pytest]\naddopts = --privleak-allow-missing\n")
        clean_env.setenv("PRIVLEAK_TEST_SKIP", "1")
    run = _run(suite, "--privleak-baseline=base.json")
    assert run.ret in (pytest.ExitCode.TESTS_FAILED, pytest.ExitCode.USAGE_ERROR), run.stdout.str()


def test_an_expect_leak_left_open_fails_the_run(pytester, clean_env):
    # before: the swallowed leak counted as expected, exit 0; now the open block is named and fails the run
    pytester.makeconftest("import pytest_privleak\npytest_privleak.expect_leak().__enter__()\n")
    pytester.makepyfile(test_suite=SUITE)
    clean_env.setenv("PRIVLEAK_TEST_AUC", "0.99")              # over its own limit, and swallowed by the test
    clean_env.setenv("PRIVLEAK_TEST_SWALLOW", "1")
    run = _run(pytester)
    assert run.ret == pytest.ExitCode.TESTS_FAILED, run.stdout.str()
    run.stdout.fnmatch_lines(["*privleak: an expect_leak() block was still open when the run ended*"])


def test_a_harmless_copy_recorded_by_hand_under_a_helper_s_key_is_refused(pytester, clean_env):
    # a conftest or test that records its own figure under the key of an audited one: no audit record, refused
    pytester.makepyfile(test_exposure=EXPOSURE)
    saved = _run(pytester, "--privleak-save-baseline=base.json")
    assert saved.ret == 0, saved.stdout.str()
    (pytester.path / "test_exposure.py").write_text(
        "from pytest_privleak.results import LeakResult, record\n\n\ndef test_pin():\n"
        "    record(LeakResult('exposure', 'exposure_bits', 1.0, threshold=12.0, label='pin'))\n")
    run = _run(pytester, "--privleak-baseline=base.json")
    assert run.ret == pytest.ExitCode.USAGE_ERROR, run.stdout.str()
    run.stdout.fnmatch_lines(["*this run's result carries no audit record although the baseline's does*"])


# --- the smaller ones ------------------------------------------------------------------------------


def _baseline_text(suite) -> str:
    return (suite.path / "base.json").read_text()


@pytest.mark.parametrize("edit, message", [
    (lambda text: text.replace('"value": 0.5', '"value": 1' + "0" * 400), "is too large for a float*"),
    (lambda text: text.replace('"value": 0.5', '"value": 0.5, "value": 0.9'), "the key 'value' appears twice*"),
    (lambda text: text.replace('"value": 0.5', '"value": NaN'), "bare literal NaN*"),
])
def test_a_malformed_baseline_is_a_usage_error_naming_the_file(suite, edit, message):
    # before: 10**400 was an INTERNALERROR (exit 3), a duplicate key's last value (0.9) was gated: exit 0
    text = _baseline_text(suite)
    assert '"value": 0.5' in text
    (suite.path / "bad.json").write_text(edit(text))
    run = _run(suite, "--privleak-baseline=bad.json")
    assert run.ret == pytest.ExitCode.USAGE_ERROR, run.stdout.str() + run.stderr.str()
    run.stderr.fnmatch_lines([f"*privleak baseline bad.json*{message}"])


def test_a_fifo_as_the_baseline_is_refused_at_once(suite):
    # before: the run hung, reading a pipe nobody writes
    import os

    os.mkfifo(suite.path / "pipe.json")
    run = suite.runpytest_subprocess("-p", "no:cacheprovider", "--privleak-baseline=pipe.json", timeout=120)
    assert run.ret == pytest.ExitCode.USAGE_ERROR, run.stdout.str()
    run.stderr.fnmatch_lines(["*privleak baseline pipe.json cannot be a report: it is a FIFO (named pipe)*"])


def test_a_newline_in_a_label_forges_no_line_in_the_terminal_or_summary(suite, clean_env):
    # before: a label holding "\\nprivleak baseline gate passed: ..." printed that line on its own
    forged = "scorer\nprivleak baseline gate passed: 1 result(s) compared with base.json, none worse"
    clean_env.setenv("PRIVLEAK_TEST_LABEL", forged)
    clean_env.setenv("PRIVLEAK_TEST_AUC", "0.50")
    assert _run(suite, "--privleak-save-baseline=forged.json").ret == 0
    clean_env.setenv("PRIVLEAK_TEST_AUC", "0.87")
    run = _run(suite, "--privleak-baseline=forged.json", "--privleak-report=rep")
    assert run.ret == pytest.ExitCode.TESTS_FAILED, run.stdout.str()
    summary = (suite.path / "rep" / "summary.md").read_text()
    for text in (run.stdout.str(), summary):
        assert not any(line.lstrip("`> ").startswith("privleak baseline gate passed") for line in text.splitlines())


@pytest.mark.parametrize("key", [None, "k" * 32])
def test_a_report_hook_that_rewrites_a_shard_s_figure_cannot_pass_the_merge_gate(suite, clean_env, key):
    # before: the shard's report.json held the hook's 0.50 (signed after the hook), the merge gate passed, exit 0;
    # now the figures are restored after the hooks, so the merge (in process and as a command) sees the 0.87
    if key:
        clean_env.setenv("PRIVLEAK_CACHE_HMAC_KEY", key)
        clean_env.setenv("PRIVLEAK_TEST_AUC", "0.50")
        assert _run(suite, "--privleak-save-baseline=base.json").ret == 0      # main's baseline, signed
        clean_env.setenv("PRIVLEAK_TEST_AUC", "0.87")
    suite.makeconftest('''
def pytest_privleak_report(config, report):
    for test in report["tests"]:
        for result in test["results"]:
            result["value"] = 0.5
''')
    _run(suite, "--privleak-shard=1/1", "--privleak-report=shard-1")
    suite.makeconftest("")
    merged = _run(suite, "--privleak-merge-reports", "shard-1", "--privleak-baseline=base.json")
    assert merged.ret == pytest.ExitCode.TESTS_FAILED, merged.stdout.str()
    merged.stdout.fnmatch_lines(["*REGRESSION test_suite.py::test_scorer membership.auc [[]scorer[]]: before 0.500, "
                                 "after 0.870*"])
    import subprocess
    import sys

    command = subprocess.run([sys.executable, "-P", "-m", "pytest_privleak", "gate", "--baseline", "base.json",
                              "shard-1"], cwd=suite.path, capture_output=True, text=True, timeout=120)
    assert command.returncode == 1, command.stdout + command.stderr


def test_a_conftest_that_replaces_the_gate_passes_in_process_but_not_the_command(suite):
    # what no in-process check can promise: code in the process replaces gate.compare and the run exits 0;
    # the verdict reached outside it, from the report that run wrote, still sees the regression
    suite.makeconftest('''
import pytest_privleak.report.gate as gate

real = gate.compare


def always_passes(current, baseline, *args, **kwargs):
    return real(baseline, baseline, *args, **kwargs)


gate.compare = always_passes
''')
    run = _run(suite, "--privleak-baseline=base.json", "--privleak-report=branch-rep")
    assert run.ret == pytest.ExitCode.OK, run.stdout.str()        # the threat model says so, honestly
    import subprocess
    import sys

    command = subprocess.run([sys.executable, "-P", "-m", "pytest_privleak", "gate", "--baseline", "base.json",
                              "branch-rep"], cwd=suite.path, capture_output=True, text=True, timeout=120)
    assert command.returncode == 1, command.stdout + command.stderr
    assert "REGRESSION test_suite.py::test_scorer membership.auc [scorer]: before 0.500, after 0.870" in command.stdout
