"""The sample project's suite cold, warm and ``-n 2`` cold, side by side, with the ratios against the goals.

Issue 11 item 6: warm cache / cold <= 0.1, and ``-n 2`` cold / ``-n 0`` cold
<= 0.6 on 2 cores. Each repeat copies ``sample_project`` (code and tests, not
its cache) to a temporary folder and runs, one after the other:

* cold   ``-n 0`` with an empty cache folder (targets trained, attacks run);
* warm   ``-n 0`` again on that folder (targets and attack results cached);
* n2     ``-n 2`` with another empty cache folder;
* n2+dur ``-n 2`` with a third empty cache folder and the cold run's report.json
  as ``--privleak-shard-durations`` (CI's case: the targets are cold, but main's
  last report says how long each group took, so the longest group starts first);
* warmn2 ``-n 2`` on the cold run's folder after the warm run: warm means cached
  under any ``-n`` (issue 24 item 6), so it must load every result.

For each run but the cold one it prints how many results were loaded from the
result cache (read from its ``report.json``); ``--quick`` runs only cold, warm
and warmn2.

Each line gives the wall time and the 1-minute load average before and
after (``os.getloadavg``): on a shared machine the ratios of one repeat are
comparable, absolute times are not. The three runs' reports are compared:
every figure (value and interval) must be the same cold, warm and under
``-n 2``. Usage::

    python bench/bench_suite.py [--repeats 1] [--keep] [--quick]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_project"
GOAL_WARM, GOAL_N2 = 0.1, 0.6
SUFFIXES = ("]", ")") + tuple("abcdefghijklmnopqrstuvwxyz0123456789_")


def speed_plugin_args() -> list[str]:
    """``-p pytest_privleak.plugin.speed`` while plugin.py does not register it itself."""
    sys.path.insert(0, str(ROOT))
    from pytest_privleak import plugin

    return [] if "pytest_privleak.plugin.speed" in getattr(plugin, "pytest_plugins", []) else \
        ["-p", "pytest_privleak.plugin.speed"]


def copy_sample(into: Path) -> Path:
    project = into / "sample_project"
    shutil.copytree(SAMPLE, project, ignore=shutil.ignore_patterns(".privleak-cache", "privleak-report",
                                                                    "__pycache__", ".pytest_cache"))
    return project


def figures(report: Path) -> dict[tuple, tuple]:
    """``(nodeid, attack, metric, label) -> (value, interval)`` of every result in a ``report.json``."""
    data = json.loads((report / "report.json").read_text(encoding="utf-8"))
    return {(test["nodeid"], r["attack"], r["metric"], r.get("label")): (r["value"], r.get("interval"))
            for test in data.get("tests", []) for r in test.get("results", [])}


def loaded_from_cache(report: Path) -> str:
    """How many results of a ``report.json`` say they were loaded from the result cache (their evidence line)."""
    try:
        data = json.loads((report / "report.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "no report"
    results = [r for test in data.get("tests", []) for r in test.get("results", [])]
    loaded = sum(1 for r in results if "result cache" in (r.get("evidence") or {}))
    return f"{loaded} of {len(results)} results loaded from the result cache"


def compare(runs: dict[str, dict]) -> str:
    """Whether every run gave the same figures (value and interval) for every result."""
    found = {name: run["figures"] for name, run in runs.items() if run.get("figures") is not None}
    if len(found) < 2:
        return "not compared (a report is missing)"
    first_name, first = next(iter(found.items()))
    differ = [f"{name}: {key} {first.get(key)} vs {figs.get(key)}" for name, figs in found.items()
              for key in sorted(set(first) | set(figs), key=str) if first.get(key) != figs.get(key)]
    if differ:
        return "DIFFER: " + "; ".join(differ[:5])
    return f"identical ({len(first)} results in {', '.join(found)})"


def snapshot_package(into: Path, source: Path = ROOT) -> dict[str, str]:
    """Copy ``pytest_privleak`` (of the checkout ``source``) under ``into``; an environment importing that copy first.

    The result cache keys on a digest of the package's source, so an edit in the
    working tree between the cold and the warm run (a shared tree) would make the
    warm run recompute every attack; the three runs use the same frozen copy.
    """
    shutil.copytree(source / "pytest_privleak", into / "pytest_privleak",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(source / "fixtures", into / "fixtures")   # the package's data, beside it as in the checkout
    # The editable install's finder would still import the working tree: drop it in every process
    # (xdist workers too) through a sitecustomize found on PYTHONPATH.
    (into / "sitecustomize.py").write_text(
        "import sys\n"
        "sys.meta_path[:] = [f for f in sys.meta_path if not (getattr(f, '__module__', '') or\n"
        "                    type(f).__module__).startswith('__editable___pytest_privleak')]\n", encoding="utf-8")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(into), *filter(None, [env.get("PYTHONPATH")])])
    return env


def run_suite(project: Path, cache: Path, report: Path, *extra: str, env: dict | None = None) -> dict:
    """One pytest run of the sample project; wall seconds, exit code, loads, the summary line, its figures."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--privleak-cache-dir={cache}",
           f"--privleak-report={report}", "--durations=4", *speed_plugin_args(), *extra]
    load_before = os.getloadavg()[0]
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=project, capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - start
    tail = [line for line in done.stdout.splitlines() if " in " in line and ("passed" in line or "failed" in line)]
    try:
        found = figures(report)
    except (OSError, ValueError, KeyError):
        found = None
    slowest = [line.strip() for line in done.stdout.splitlines() if line.strip().endswith(tuple(SUFFIXES))
               and line.split("s ", 1)[0].replace(".", "", 1).strip().isdigit()]
    return {"seconds": seconds, "rc": done.returncode, "load": (load_before, os.getloadavg()[0]), "slowest": slowest,
            "cache_line": loaded_from_cache(report),
            "summary": tail[-1].strip("= ") if tail else done.stdout[-400:] + done.stderr[-400:],
            "figures": found}


def line(name: str, run: dict) -> str:
    return (f"  {name:<6} {run['seconds']:7.1f} s   load {run['load'][0]:4.1f} -> {run['load'][1]:4.1f}   "
            f"exit {run['rc']}   {run['summary']}")


def verdict(ratio: float, goal: float) -> str:
    return f"{ratio:.2f} (goal <= {goal}: {'met' if ratio <= goal else 'NOT met'})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--keep", action="store_true", help="keep the temporary folders (prints where)")
    parser.add_argument("--quick", action="store_true", help="only cold, warm and warm -n 2 (no cold -n 2 runs)")
    args = parser.parse_args()
    print(f"sample project suite, {os.cpu_count()} CPUs, python {sys.version.split()[0]}")
    status = 0
    for repeat in range(1, args.repeats + 1):
        work = Path(tempfile.mkdtemp(prefix="privleak-bench-suite-"))
        try:
            project = copy_sample(work)
            env = snapshot_package(work / "package")
            runs = {"cold": run_suite(project, work / "cache-n0", work / "report-cold", env=env),
                    "warm": run_suite(project, work / "cache-n0", work / "report-warm", env=env)}
            if not args.quick:
                runs["n2"] = run_suite(project, work / "cache-n2", work / "report-n2", "-n", "2", env=env)
                # CI's case: a cold target cache, but main's last report gives the durations to order the groups by
                runs["n2+dur"] = run_suite(project, work / "cache-n2d", work / "report-n2d", "-n", "2",
                                           f"--privleak-shard-durations={work / 'report-cold' / 'report.json'}",
                                           env=env)
            # warm means cached under any -n: the warm folder again, now with two workers
            runs["warmn2"] = run_suite(project, work / "cache-n0", work / "report-warmn2", "-n", "2", env=env)
            print(f"repeat {repeat}:")
            for name, run in runs.items():
                print(line(name, run))
                status |= run["rc"]
            for name in ("cold", "warm", "warmn2"):
                print(f"  {name}: {runs[name]['cache_line']}")
            for name in ("cold", "warm"):
                print(f"  slowest {name}: " + " | ".join(runs[name]["slowest"][:4]))
            cold = runs["cold"]
            print(f"  warm / cold      = {verdict(runs['warm']['seconds'] / cold['seconds'], GOAL_WARM)}")
            print(f"  warm -n 2 / cold = {verdict(runs['warmn2']['seconds'] / cold['seconds'], GOAL_WARM)}")
            if not args.quick:
                print(f"  -n 2 / -n 0 cold = {verdict(runs['n2']['seconds'] / cold['seconds'], GOAL_N2)}")
                print(f"  -n 2 with durations / -n 0 cold = "
                      f"{verdict(runs['n2+dur']['seconds'] / cold['seconds'], GOAL_N2)}")
            print(f"  figures          : {compare(runs)}")
            sys.stdout.flush()
        finally:
            if args.keep:
                print(f"  kept {work}")
            else:
                shutil.rmtree(work, ignore_errors=True)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
