"""Bad --privleak-shard values, durations files and shard report folders: a clear error naming the option or
file and the fix (issue 12 rules; none of these options existed before issue 11)."""
import json

import pytest

from pytest_privleak.report.merge import MergeError, load_shard
from pytest_privleak.distribute.sharding import ShardError, parse_shard
from pytest_privleak.report.reader import read_durations

SHARD_FIX = r"write --privleak-shard=I/N with whole numbers 1 <= I <= N"


@pytest.mark.parametrize("value, problem", [
    ("0/3", r"shard number I must be between 1 and 3"),
    ("4/3", r"shard number I must be between 1 and 3"),
    ("x", r"is not of the form I/N"),
    ("3", r"is not of the form I/N"),
    ("1/0", r"number of shards N must be at least 1"),
    ("1.5/3", r"is not of the form I/N"),
])
def test_bad_shard_values(value, problem):
    with pytest.raises(ShardError, match=rf"--privleak-shard='{value}'.*{problem}.*{SHARD_FIX}"):
        parse_shard(value)


def test_a_bad_shard_value_is_a_usage_error(pytester):
    pytester.makepyfile(test_a="def test_a():\n    pass\n")
    result = pytester.runpytest_subprocess("--privleak-shard=0/3")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--privleak-shard='0/3': the shard number I must be between 1 and 3*"])


def test_durations_without_a_shard_or_xdist_is_a_usage_error(pytester):
    pytester.makepyfile(test_a="def test_a():\n    pass\n")
    result = pytester.runpytest_subprocess("--privleak-shard-durations=r.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--privleak-shard-durations='r.json' is given without --privleak-shard or -n; add*"])


@pytest.mark.parametrize("content, problem", [
    (None, r"cannot be read"),
    (b"{not json", r"is not JSON"),
    (b"[1, 2]", r"expected a JSON object, got list"),
    (json.dumps({"t.py::a": -1}).encode(), r"test 't.py::a' has duration -1, not a finite number of seconds >= 0"),
    (json.dumps({"schema": "pytest-privleak/report", "version": 2}).encode(), r"not a version-1 pytest-privleak"),
    (json.dumps({"schema": "pytest-privleak/report", "version": 1, "tests": [{"nodeid": ""}]}).encode(),
     r"does not match the report schema \(at tests\[0\]"),
])
def test_bad_durations_files(tmp_path, content, problem):
    path = tmp_path / "durations.json"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(ShardError, match=rf"--privleak-shard-durations='{path}'.*{problem}.*(report\.json|leave the "
                                         r"option out)"):
        read_durations(path)


def _report(version=1, **changes):
    report = {"schema": "pytest-privleak/report", "version": version, "plugin_version": "0", "created": "",
              "run": {"seed": 0, "xdist": False, "workers": []}, "summary": {}, "tests": [], "baseline": None}
    return {**report, **changes}


@pytest.mark.parametrize("content, problem", [
    (None, r"report\.json does not exist, so that shard's results are missing"),
    (b"{not json", r"cannot be merged: is not JSON \(line 1"),
    (json.dumps(_report(version=7)).encode(), r"cannot be merged: has report version 7, this plugin reads version 1"),
    (json.dumps(_report(tests=[{"nodeid": "t.py::t", "results": [{"key": ""}]}])).encode(),
     r"cannot be merged: does not match the report schema \(at tests\[0\]\.results\[0\]"),
])
def test_bad_shard_reports(tmp_path, content, problem):
    if content is not None:
        (tmp_path / "report.json").write_bytes(content)
    with pytest.raises(MergeError, match=rf"--privleak-merge-reports: .*{problem}.*re-run the shard jobs"):
        load_shard(tmp_path)
    with pytest.raises(MergeError, match=r"nowhere is not a folder; give the folders the shard jobs wrote"):
        load_shard(tmp_path / "nowhere")


def test_a_merge_with_an_unreadable_baseline_is_refused_and_says_so_in_the_report(pytester):
    (pytester.path / "shard").mkdir()
    (pytester.path / "shard" / "report.json").write_text(json.dumps(_report()), encoding="utf-8")
    result = pytester.runpytest_subprocess("--privleak-merge-reports", "shard", "--privleak-baseline=gone.json",
                                           "--privleak-report=merged")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*privleak baseline gone.json does not exist; regenerate it on the main branch*"])
    assert "gone.json does not exist" in (pytester.path / "merged" / "summary.md").read_text(encoding="utf-8")


def test_shard_and_merge_options_together_are_refused(pytester):
    result = pytester.runpytest_subprocess("--privleak-shard=1/2", "--privleak-merge-reports", "a")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--privleak-shard and --privleak-merge-reports do not go together*"])
