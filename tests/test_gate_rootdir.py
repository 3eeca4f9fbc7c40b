"""A path option's value outside the project must not move the rootdir unseen (issue 21 item 6).

pytest picks the rootdir and the ini file before plugins' options are known,
so ``--privleak-baseline ../artifacts/base.json`` (space, not ``=``) counts an
existing ``../artifacts/base.json`` as a test path: the rootdir moved to the
folder above the project, node ids became ``sp/tests/...`` (every baseline
entry "missing") and the default cache folder moved with it. Both spellings of
every path option, in subprocess runs from inside the project.
"""
from __future__ import annotations

import json

import pytest

pytest_plugins = ["pytester"]

SUITE = '''
from pytest_privleak.results import LeakResult, record


def test_figure():
    record(LeakResult("membership", "auc", 0.5, threshold=0.95, label="fig"))
'''
KEY = "tests/test_sp.py::test_figure::membership.auc[fig]"


@pytest.fixture
def project(pytester, monkeypatch):
    """``sp/`` (pytest.ini, tests/) beside ``artifacts/`` holding a baseline, a shard report and a folder."""
    sp = pytester.path / "sp"
    (sp / "tests").mkdir(parents=True)
    (sp / "pytest.ini").write_text("[pytest]\nprivleak_seed = 3\n")
    (sp / "tests" / "test_sp.py").write_text(SUITE)
    (pytester.path / "artifacts" / "cache").mkdir(parents=True)
    monkeypatch.chdir(sp)
    made = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--privleak-save-baseline=../artifacts/base.json",
                                         "--privleak-report=../artifacts/shard1")
    assert made.ret == 0, made.stdout.str()
    return pytester


def _keys(path):
    return [r["key"] for t in json.loads(path.read_text())["tests"] for r in t["results"]]


def _run(pytester, *args):
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args)


OPTIONS = {
    "--privleak-baseline": ("../artifacts/base.json", ()),
    "--privleak-save-baseline": ("../artifacts/base.json", ()),
    "--privleak-cache-dir": ("../artifacts/cache", ()),
    "--privleak-merge-reports": ("../artifacts/shard1", ("--privleak-report=merged",)),
    "--privleak-shard-durations": ("../artifacts/shard1/report.json", ("--privleak-shard=1/1",)),
}


@pytest.mark.parametrize("option", sorted(OPTIONS))
def test_the_space_spelling_that_moves_the_rootdir_is_refused_naming_it_and_the_fix(project, option):
    # old: the run went on with rootdir = the folder above the project (node ids sp/tests/..., a second cache)
    value, extra = OPTIONS[option]
    run = _run(project, option, value, *extra)
    assert run.ret == pytest.ExitCode.USAGE_ERROR, run.stdout.str()
    root = project.path
    run.stderr.fnmatch_lines([f"ERROR: pytest moved its rootdir to {root} (the project's is {root / 'sp'}) and did "
                              f"not read the project's ini file {root / 'sp' / 'pytest.ini'} because it counted the "
                              f"value of {option} {value} as a test path*write the option with '=' "
                              f"({option}={value})"])


@pytest.mark.parametrize("option", sorted(OPTIONS))
def test_the_equals_spelling_keeps_the_projects_rootdir_and_keys(project, option):
    value, extra = OPTIONS[option]
    run = _run(project, f"{option}={value}", "--privleak-report=rep", *extra)
    assert run.ret == 0, run.stdout.str() + run.stderr.str()
    report = project.path / "sp" / ("merged" if option == "--privleak-merge-reports" else "rep") / "report.json"
    assert _keys(report) == [KEY]
    assert json.loads(report.read_text())["run"]["seed"] == 3   # the project's ini was read


def test_a_path_inside_the_project_or_not_yet_existing_is_fine_in_either_spelling(project):
    run = _run(project, "--privleak-save-baseline", "inside/base.json")   # does not exist yet: not counted
    assert run.ret == 0, run.stderr.str()
    run = _run(project, "--privleak-baseline", "inside/base.json")        # inside: the rootdir stays
    assert run.ret == 0, run.stderr.str()
    assert _keys(project.path / "sp" / "inside" / "base.json") == [KEY]
    assert not (project.path / ".privleak-cache").exists()
