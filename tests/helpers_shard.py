"""A small generated test project for the sharding and merge tests, and how to compare two reports.

Several modules of privacy tests record fast results with ``pytest_privleak.results.record``;
two tests in different modules share an ``xdist_group`` (as tests sharing a target would)
and each module has a module-scoped "target" fixture. An
environment variable ``BUMP_<module>`` moves a module's figures, to make a regression.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

MODULE = '''
import os
import pytest
from pytest_privleak.results import LeakResult, record

BUMP = float(os.environ.get("BUMP_{name}", "0"))


@pytest.fixture(scope="module")
def target():
    return {{"kind": "toy-{name}"}}


@pytest.mark.parametrize("k", range({count}))
def test_figure(target, k):
    record(LeakResult("toy", "accuracy", round(0.05 * k + BUMP, 6), threshold=0.9, label=f"{name}-{{k}}",
                      chance=0.1, target={{"hash": target["kind"]}}))
'''

GROUPED = '''
import pytest
from pytest_privleak.results import LeakResult, record


@pytest.mark.xdist_group("shared-target")
@pytest.mark.privleak
def test_{name}_shares_a_target():
    record(LeakResult("toy", "exposure_bits", {value}, threshold=None, label="{name}"))
'''

#: Module name -> number of parametrized tests.
MODULES = {"alpha": 4, "beta": 3, "gamma": 3, "delta": 2}


def make_project(folder: Path) -> list[str]:
    """Write the project into ``folder``; returns the node ids it holds (sorted)."""
    folder = Path(folder)
    files = {f"test_{name}": MODULE.format(name=name, count=count) for name, count in MODULES.items()}
    files["test_group_one"] = GROUPED.format(name="one", value=2.5)
    files["test_group_two"] = GROUPED.format(name="two", value=3.5)
    for name, text in files.items():
        (folder / f"{name}.py").write_text(text, encoding="utf-8")
    (folder / "pytest.ini").write_text("[pytest]\nprivleak_seed = 0\n", encoding="utf-8")
    ids = [f"test_{n}.py::test_figure[{k}]" for n, c in MODULES.items() for k in range(c)]
    ids += ["test_group_one.py::test_one_shares_a_target", "test_group_two.py::test_two_shares_a_target"]
    return sorted(ids)


def run_pytest(folder: Path, *args: str, env: dict[str, str] | None = None,
               timeout: float = 300) -> subprocess.CompletedProcess:
    """``python -m pytest ARGS`` in ``folder`` (a subprocess, as CI runs it)."""
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=folder,
                          env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=timeout)


def run_many(folder: Path, runs: dict[str, tuple], workers: int = 3,
             timeout: float = 300) -> dict[str, subprocess.CompletedProcess]:
    """Several independent runs at once (``name -> (args, env)``); the machine waits less on start-up."""
    with ThreadPoolExecutor(workers) as pool:
        futures = {name: pool.submit(run_pytest, folder, *args, env=env, timeout=timeout)
                   for name, (args, env) in runs.items()}
        return {name: future.result() for name, future in futures.items()}


def read_report(folder: Path) -> dict:
    return json.loads((Path(folder) / "report.json").read_text(encoding="utf-8"))


#: What legitimately differs between a merged report and the unsharded run's.
RUN_SPECIFIC_RUN = ("workers", "xdist", "merged_from", "shard")


def _untimed(result: dict) -> dict:
    """A result without the wall-clock ``seconds`` an attack or a training run notes in ``extra``/``target``, and
    without the evidence line saying it was loaded from the result cache (a shard may load what another run
    computed)."""
    from pytest_privleak.cache.results import LOADED_EVIDENCE

    out = dict(result)
    for name in ("extra", "target"):
        if isinstance(out.get(name), dict):
            out[name] = {k: v for k, v in out[name].items() if k != "seconds"}
    if isinstance(out.get("evidence"), dict):
        out["evidence"] = {k: v for k, v in out["evidence"].items() if k != LOADED_EVIDENCE}
    return out


def comparable(report: dict) -> dict:
    """``report`` without what depends on how it was run: time, durations (also the ``seconds`` in results),
    workers, shard bookkeeping."""
    out = {k: v for k, v in report.items() if k not in ("created",)}
    out["run"] = {k: v for k, v in report["run"].items() if k not in RUN_SPECIFIC_RUN}
    out["tests"] = [{**{k: v for k, v in t.items() if k not in ("duration", "worker")},
                     "results": [_untimed(r) for r in t["results"]]} for t in report["tests"]]
    if report.get("baseline"):
        out["baseline"] = {k: v for k, v in report["baseline"].items() if k != "path"}
    return out
