"""Usage errors show without plugin internals (issue 24 item 6): a user's bad call fails at the user's own line.

Each case runs a team's test file in a subprocess (``pytester.runpytest_subprocess``, the default traceback
style) and reads what the team would see: the failing line of their own test, the error naming the argument
and the fix, and no frame of ``pytest_privleak/``. A bad ``--privleak-*`` option is a one-line ``ERROR:``
without any traceback.
"""
from __future__ import annotations

import re
from fnmatch import fnmatch

import pytest

INTERNAL_FRAME = re.compile(r"pytest_privleak/[\w/]+\.py:\d+")

#: name -> (the body of a team's test, the lines the team must see for it)
CASES = {
    "negative_exposure_limit": (
        "assert_exposure_below(object(), canary('pin'), max_bits=-1)",
        ["*assert_exposure_below(object(), canary('pin'), max_bits=-1)",
         "E*ValueError: max_bits must be a finite number >= 0*got -1; fix: e.g. max_bits=4.0*"]),
    "rank_limit_below_1": (
        "assert_mix_and_match_rank_at_least(object(), mask_canary('i bought new lamp .', 'Buy'), min_rank=0)",
        ["*assert_mix_and_match_rank_at_least(object(), mask_canary(*), min_rank=0)",
         "E*ValueError: min_rank=0 must be a finite number >= 1*fix: e.g. min_rank=10"]),
    "unknown_method": (
        "assert_mix_and_match_rank_at_least(object(), mask_canary('i bought new lamp .', 'Buy'), 10, method='fast')",
        ["*assert_mix_and_match_rank_at_least(object(), mask_canary(*), 10, method='fast')",
         "E*ValueError: method='fast' must be one of*fix: 'auto'*"]),
    "keyword_not_one_lower_case_word": (
        "assert_keyword_inference_at_most(object(), ('leg', 'Hand'), 0.6)",
        ["*assert_keyword_inference_at_most(object(), ('leg', 'Hand'), 0.6)",
         "E*ValueError: keywords?1?='Hand' is not a single lower-case word; fix: one word per entry*"]),
    "unknown_keyword_attack_model": (
        "measure_keyword_inference(object(), 'leg', model='forest')",
        ["*measure_keyword_inference(object(), 'leg', model='forest')",
         "E*ValueError: model='forest' is not an attack model; fix: 'auto', 'svm', 'mlp' or 'dann'"]),
    "membership_limit_above_1": (
        "assert_membership_auc_at_most(object(), ('a',), ('b',), max_auc=1.5)",
        ["*assert_membership_auc_at_most(object(), ('a',), ('b',), max_auc=1.5)",
         "E*ValueError: max_auc must be a number in ?0, 1? (chance is 0.5), got 1.5; fix: e.g. max_auc=0.6"]),
}
TEAM_FILE = """from pytest_privleak import (assert_exposure_below, assert_keyword_inference_at_most,
                             assert_membership_auc_at_most, assert_mix_and_match_rank_at_least,
                             measure_keyword_inference)
from pytest_privleak.attacks.mix_and_match.canaries import mask_canary
"""


def test_a_bad_call_fails_at_the_users_line_without_plugin_frames(pytester):
    pytester.makepyfile(test_team=TEAM_FILE + "".join(f"\n\ndef test_{name}(canary):\n    {body}\n"
                                                      for name, (body, _) in CASES.items()))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=len(CASES))
    out = result.stdout.str()
    for name, (_, lines) in CASES.items():
        section = out.split(f" test_{name} ", 1)[1].split("\n___", 1)[0].split("short test summary", 1)[0]
        for pattern in lines:
            assert any(fnmatch(line, pattern) for line in section.splitlines()), (name, pattern, section)
        assert re.search(r"^test_team\.py:\d+: ValueError$", section, re.M), (name, section)  # the user's line
        assert INTERNAL_FRAME.findall(section) == [], (name, section)                         # no plugin frame
        assert "fix" in section.split("ValueError", 1)[1], (name, section)


@pytest.mark.parametrize("option, message", [
    ("--privleak-seeds=0", "ERROR: --privleak-seeds='0' must be at least 1*fix: 1 for one draw*"),
    ("--privleak-lock-timeout=-1", "ERROR: --privleak-lock-timeout='-1' is not a number of seconds > 0; fix:*"),
    ("--privleak-shard=3/2", "ERROR: --privleak-shard='3/2': the shard number I must be between 1 and 2*"),
])
def test_a_bad_option_is_one_error_line_without_a_traceback(pytester, option, message):
    pytester.makepyfile(test_team="def test_it():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", option)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    both = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in both and "INTERNALERROR" not in both and INTERNAL_FRAME.findall(both) == []


def test_an_unknown_canary_pattern_fails_at_the_users_line_without_plugin_frames(pytester):
    pytester.makepyfile(test_team="def test_it(canary):\n    canary('pni')\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*canary('pni')", "E*ValueError: unknown canary pattern 'pni'; known: *"])
    assert INTERNAL_FRAME.findall(result.stdout.str()) == []


def test_an_unknown_target_kind_fails_at_the_users_line_and_fulltrace_shows_the_package(pytester):
    pytester.makepyfile(test_team="def test_it(train_target, nlu_dataset):\n    train_target('bert', nlu_dataset)\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*train_target('bert', nlu_dataset)", "E*ValueError: unknown target kind 'bert'*"])
    assert INTERNAL_FRAME.findall(result.stdout.str()) == []
    full = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--fulltrace")
    assert INTERNAL_FRAME.findall(full.stdout.str()) != []


def test_a_teams_own_value_error_keeps_its_frames(pytester):
    pytester.makepyfile(helper="def check(x):\n    raise ValueError('our own check failed')\n",
                        test_team="from helper import check\n\ndef test_it(canary):\n    check(canary('pin'))\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*raise ValueError('our own check failed')", "E*ValueError: our own check failed"])
