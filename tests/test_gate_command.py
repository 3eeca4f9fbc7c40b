"""``python -m pytest_privleak gate``: the verdict reached outside the run under review (issue 36 item 2).

The command reads shard reports as untrusted data, imports no project code and no conftest, and applies the
in-process gate's own rules (``report.gate.compare``); each malformed report is refused with exit 4 naming it.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_privleak.report.baseline_file import baseline_to_save
from pytest_privleak.report.model import build_report, make_test_entry
from pytest_privleak.report.writer import write_baseline, write_report
from pytest_privleak.results import LeakResult

ROOT = Path(__file__).resolve().parents[1]
AUDIT = {"helper": "measure_toy", "version": "0.1.0", "settings": {"samples": 1000, "seed": 0}}


def _result(value: float, label: str, **audit_settings) -> dict:
    audit = {**AUDIT, "settings": {**AUDIT["settings"], **audit_settings}}
    return LeakResult("membership", "auc", value, threshold=0.95, label=label, audit=audit).to_json()


def _shards(folder: Path, values: dict[str, float], count: int = 2, **audit_settings) -> list[str]:
    """``count`` shard report folders, test i on shard i, as the shard jobs write them."""
    names = []
    for i, (label, value) in enumerate(sorted(values.items()), start=1):
        report = build_report([make_test_entry(f"tests/test_{label}.py::test_it", "passed", 1.0, None, None, 0,
                                               [_result(value, label, **audit_settings)])], [], seed=0, xdist=False)
        report["run"]["shard"] = {"index": i, "count": count, "durations": None}
        write_report(report, folder / f"privleak-report-{i}")
        names.append(str(folder / f"privleak-report-{i}"))
    return names


def _baseline(path: Path, values: dict[str, float]) -> Path:
    tests = [make_test_entry(f"tests/test_{label}.py::test_it", "passed", 1.0, None, None, 0, [_result(v, label)])
             for label, v in sorted(values.items())]
    saved, problems = baseline_to_save(build_report(tests, [], seed=0, xdist=False), {})
    assert problems == []
    write_baseline(saved, path)
    return path


def gate(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    """The command as the workflow runs it, with ``-P`` for ``-I`` so that this checkout is the one imported."""
    environ = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    environ.pop("PRIVLEAK_CACHE_HMAC_KEY", None) if "PRIVLEAK_CACHE_HMAC_KEY" not in (env or {}) else None
    environ.pop("GITHUB_STEP_SUMMARY", None)
    return subprocess.run([sys.executable, "-P", "-m", "pytest_privleak", "gate", *args], cwd=cwd, env=environ,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture
def main_and_branch(tmp_path):
    base = _baseline(tmp_path / "base.json", {"a": 0.50, "b": 0.60})
    return tmp_path, base


def test_shard_reports_as_good_as_main_pass(main_and_branch):
    tmp, base = main_and_branch
    run = gate("--baseline", str(base), *_shards(tmp / "shards", {"a": 0.51, "b": 0.60}), cwd=tmp)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "privleak baseline gate passed: 2 result(s) compared with" in run.stdout


def test_a_regression_fails_and_the_merged_report_and_next_baseline_are_written(main_and_branch):
    tmp, base = main_and_branch
    run = gate("--baseline", str(base), "--report", "merged", "--save-baseline", "next.json",
               *_shards(tmp / "shards", {"a": 0.87, "b": 0.60}), cwd=tmp)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "REGRESSION tests/test_a.py::test_it membership.auc [a]: before 0.500, after 0.870" in run.stdout
    merged = json.loads((tmp / "merged" / "report.json").read_text())
    assert merged["baseline"]["regressions"][0]["key"] == "tests/test_a.py::test_it::membership.auc[a]"
    assert {r["audit"]["settings"]["samples"] for t in merged["tests"] for r in t["results"]} == {1000}
    assert (tmp / "next.json").is_file() and (tmp / "merged" / "summary.md").is_file()


def test_a_weaker_audit_is_weakened_as_in_process(main_and_branch):
    tmp, base = main_and_branch
    run = gate("--baseline", str(base), *_shards(tmp / "shards", {"a": 0.40, "b": 0.60}, samples=10), cwd=tmp)
    assert run.returncode == 4, run.stdout + run.stderr
    assert "WEAKENED tests/test_a.py::test_it membership.auc [a]: samples 1000 -> 10 (higher is stronger)" in run.stdout


def test_a_missing_shard_and_a_missing_entry_are_usage_errors(main_and_branch):
    tmp, base = main_and_branch
    shards = _shards(tmp / "shards", {"a": 0.5, "b": 0.6})
    run = gate("--baseline", str(base), shards[0], cwd=tmp)
    assert run.returncode == 4 and "shard(s) 2/2 are missing" in run.stdout
    single = _shards(tmp / "one", {"a": 0.5}, count=1)
    run = gate("--baseline", str(base), *single, cwd=tmp)
    assert run.returncode == 4 and "MISSING tests/test_b.py::test_it::membership.auc[b]" in run.stdout
    assert gate("--baseline", str(base), "--allow-missing", *single, cwd=tmp).returncode == 0


def test_a_leak_in_the_reports_fails_even_without_a_baseline(tmp_path):
    """The shard job's own exit status comes from the process under review; the reports' verdicts do not."""
    run = gate(*_shards(tmp_path / "shards", {"a": 0.99, "b": 0.5}), cwd=tmp_path)
    assert run.returncode == 1 and "privleak: LEAK tests/test_a.py::test_it::membership.auc[a] = 0.990" in run.stdout


def _one_report(tmp: Path) -> Path:
    folder = Path(_shards(tmp / "shards", {"a": 0.5}, count=1)[0])
    return folder / "report.json"


@pytest.mark.parametrize("breakage, message", [
    ("fifo", "it is a FIFO (named pipe), not a regular file"),
    ("duplicate", "the key 'value' appears twice in one object"),
    ("huge integer", "is too large for a float"),
    ("nan literal", "bare literal NaN"),
    ("huge float", "the number 1e999 is too large for a float"),
    ("not json", "is not JSON"),
    ("another document", "is not a pytest-privleak report"),
    ("a folder without report.json", "does not exist"),
    ("bad value", "'value' must be a number"),
    ("bad audit", "'audit' must be an object whose 'settings' is an object"),
])
def test_each_malformed_report_is_refused_with_exit_4_naming_the_file(tmp_path, breakage, message):
    path = _one_report(tmp_path)
    text = path.read_text()
    given = str(path)
    if breakage == "fifo":
        path.unlink()
        os.mkfifo(path)
    elif breakage == "duplicate":
        path.write_text(text.replace('"value": 0.5', '"value": 0.5, "value": 0.1', 1))
    elif breakage == "huge integer":
        path.write_text(text.replace('"value": 0.5', '"value": 1' + "0" * 400, 1))
    elif breakage == "nan literal":
        path.write_text(text.replace('"value": 0.5', '"value": NaN', 1))
    elif breakage == "huge float":
        path.write_text(text.replace('"value": 0.5', '"value": 1e999', 1))
    elif breakage == "not json":
        path.write_text(text[:-20])
    elif breakage == "another document":
        path.write_text('{"tests": []}')
    elif breakage == "a folder without report.json":
        path.unlink()
        given = str(path.parent)
    elif breakage == "bad value":
        path.write_text(text.replace('"value": 0.5', '"value": "0.5"', 1))
    elif breakage == "bad audit":
        data = json.loads(text)
        data["tests"][0]["results"][0]["audit"] = {"settings": 3}
        path.write_text(json.dumps(data))
    base = _baseline(tmp_path / "base.json", {"a": 0.5})
    run = gate("--baseline", str(base), "--report", "merged", given, cwd=tmp_path)
    assert run.returncode == 4, run.stdout + run.stderr
    assert message in run.stdout and str(path) in run.stdout, run.stdout
    assert message in (tmp_path / "merged" / "summary.md").read_text()     # the job summary says why


def test_a_report_too_large_is_refused_before_it_is_read(tmp_path, monkeypatch):
    from pytest_privleak.report import reader

    path = _one_report(tmp_path)
    monkeypatch.setattr(reader, "MAX_REPORT_BYTES", 100)
    with pytest.raises(reader.UntrustedJSONError, match="more than a report can"):
        reader.read_json_file(path)


def test_with_the_key_an_edited_report_is_refused_and_without_it_a_signed_one_needs_unsigned_ok(tmp_path):
    key = {"PRIVLEAK_CACHE_HMAC_KEY": "k" * 32}
    base = _baseline(tmp_path / "base.json", {"a": 0.5})
    script = ("from pytest_privleak.report.baseline_file import sign\nimport json, sys\n"
              "for p in sys.argv[1:]:\n    d = json.load(open(p))\n    json.dump(sign(d), open(p, 'w'))\n")
    path = _one_report(tmp_path)
    subprocess.run([sys.executable, "-c", script, str(path), str(base)],      # both signed, as main's jobs sign
                   env={**os.environ, **key, "PYTHONPATH": str(ROOT)}, check=True)
    assert gate("--baseline", str(base), str(path), cwd=tmp_path, env=key).returncode == 0
    edited = path.read_text().replace('"value": 0.5', '"value": 0.4', 1)
    path.write_text(edited)
    run = gate("--baseline", str(base), str(path), cwd=tmp_path, env=key)
    assert run.returncode == 4 and "its signature does not match its entries" in run.stdout
    run = gate("--baseline", str(base), str(path), cwd=tmp_path)
    assert run.returncode == 4 and "is signed, but PRIVLEAK_CACHE_HMAC_KEY is not set here" in run.stdout
    accepted = gate("--baseline", str(base), "--unsigned-ok", str(path), cwd=tmp_path)
    assert accepted.returncode == 0 and "is signed but was read unverified" in accepted.stdout


def test_the_command_imports_no_project_code_no_conftest_and_no_torch(tmp_path):
    """A project's conftest.py, pytest.ini and a module shadowing the standard library sit in the working
    folder; none is imported (``-P``/``-I``: the working folder is not on the path; no pytest run)."""
    base = _baseline(tmp_path / "base.json", {"a": 0.5})
    shards = _shards(tmp_path / "shards", {"a": 0.5}, count=1)
    marker = tmp_path / "imported"
    for name in ("conftest.py", "json.py", "pytest_privleak_evil.py"):
        (tmp_path / name).write_text(f"open({str(marker)!r}, 'a').write({name!r})\n")
    (tmp_path / "pytest.ini").write_text("[pytest]\naddopts = --privleak-allow-missing\n")
    probe = ("import runpy, sys\nsys.argv = ['pytest_privleak', 'gate', '--baseline', sys.argv[1], sys.argv[2]]\n"
             "try:\n    runpy.run_module('pytest_privleak', run_name='__main__')\nexcept SystemExit as e:\n"
             "    code = e.code\nheavy = sorted(m for m in ('torch', 'numpy', 'scipy', 'conftest', 'json.py') "
             "if m in sys.modules)\nprint('EXIT', code, 'HEAVY', heavy)\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, "-P", "-c", probe, str(tmp_path / "base.json"), shards[0]], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=120)
    assert "EXIT 0 HEAVY []" in run.stdout, run.stdout + run.stderr
    assert not marker.exists()
    assert base.is_file()


def test_the_command_and_the_in_process_merge_reach_the_same_verdict(pytester, tmp_path):
    """One implementation: for the same shard reports and baseline, ``pytest --privleak-merge-reports`` and the
    command give the same exit status (pass, regression, weakened)."""
    base = _baseline(pytester.path / "base.json", {"a": 0.5, "b": 0.6})
    cases = {"pass": ({"a": 0.5, "b": 0.6}, {}), "regression": ({"a": 0.9, "b": 0.6}, {}),
             "weakened": ({"a": 0.5, "b": 0.6}, {"samples": 10})}
    pytester.makeini("[pytest]\n")
    for name, (values, settings) in cases.items():
        shards = _shards(pytester.path / name, values, **settings)
        command = gate("--baseline", str(base), *shards, cwd=pytester.path).returncode
        in_process = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--privleak-merge-reports", *shards,
                                                   f"--privleak-baseline={base}").ret
        assert command == int(in_process), name
    assert tmp_path.is_dir()
