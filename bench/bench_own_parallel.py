"""An own model's 7 seeds cold: one after another, over a process pool, and over ``-n 2`` workers (issue 35 item 2).

A suite whose privacy test trains the sample project's own GRU
(``intent_model``) with the default 7 training seeds and measures the exact
exposure of a 4-digit pin over them, copied to a temporary folder and run
cold (an empty cache each time), one run after the other:

* ``seq``   ``-n 0 --privleak-train-processes=1``: the seeds one after another, as before this change;
* ``pool``  ``-n 0`` (default ``--privleak-train-processes``: the usable cores): this process and a child;
* ``n2``    ``-n 2``: the worker that runs the test posts the seeds on the job board and the idle worker
  trains some of them.

Prints each run's wall time, load average before and after, the ratios
``pool / seq``, ``n2 / seq`` (the issue's goal: <= 0.6 on 2 cores) and
``n2 / pool``, each run's CPU seconds, how many seeds each process trained
(the training function logs its worker and PID), whether the three reports
give identical figures, and, before and after, how much more work two busy
processes of this session do than one: on a machine whose scheduler shares
the cores per session (Linux's autogroup, as on a shared development
machine), a second process gains nothing while other sessions keep the cores
busy, so the ratios can only be read beside that figure.
``--quick``: 3 seeds, 1 epoch (the CI-sized check of the bench itself).

Usage: ``python bench/bench_own_parallel.py [--epochs 4] [--seeds 7] [--keep]``
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_project"

TEST = '''
"""An own model's privacy test, as the sample project writes it."""
import os

from intent_model.model import IntentSlotGRU, Labels, SoftInputAdapter
from logged import train
from pytest_privleak import assert_exposure_below


def untrained_gru(dataset):
    return IntentSlotGRU(Labels.from_utterances(dataset.train))


def test_pin_exposure_of_our_gru(train_own_model, nlu_dataset, inject_canaries, canary):
    pin = canary("pin", length=4)
    model = train_own_model(train, inject_canaries(nlu_dataset, pin, repeats=10), build=untrained_gru,
                            wrap=SoftInputAdapter, epochs=int(os.environ["BENCH_EPOCHS"]))
    assert_exposure_below(model, canary("pin", length=4, seed=99), max_bits=20.0, name="a pin never said")
'''

LOGGED = '''
"""The sample project's training function, logging which process trained which seed."""
import os

from intent_model.train import train as plain_train


def train(dataset, epochs: int = 12, seed: int = 0):
    model = plain_train(dataset, epochs=epochs, seed=seed)
    with open(os.environ["BENCH_LOG"], "a") as out:
        out.write(f"{seed} {os.environ.get('PYTEST_XDIST_WORKER', 'main')} {os.getpid()}\\n")
    return model
'''


def make_project(into: Path) -> Path:
    project = into / "project"
    (project / "tests").mkdir(parents=True)
    shutil.copytree(SAMPLE / "intent_model", project / "intent_model", ignore=shutil.ignore_patterns("__pycache__"))
    (project / "logged.py").write_text(LOGGED, encoding="utf-8")
    (project / "tests" / "test_own.py").write_text(TEST, encoding="utf-8")
    (project / "pyproject.toml").write_text('[tool.pytest.ini_options]\npythonpath = ["."]\nprivleak_seed = "0"\n',
                                            encoding="utf-8")
    return project


def figures(report: Path) -> list:
    data = json.loads((report / "report.json").read_text(encoding="utf-8"))
    return sorted((r.get("name"), r.get("label"), r.get("value"), tuple(r.get("interval") or ()))
                  for test in data.get("tests", []) for r in test.get("results", []))


def run(project: Path, name: str, seeds: int, epochs: int, *extra: str) -> dict:
    cache, report, log = project / f"cache-{name}", project / f"report-{name}", project / f"log-{name}"
    env = dict(os.environ, BENCH_EPOCHS=str(epochs), BENCH_LOG=str(log), PRIVLEAK_SEEDS=str(seeds),
               OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--privleak-cache-dir={cache}",
           f"--privleak-report={report}", *extra]
    load = os.getloadavg()[0]
    cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=project, capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_seconds = after.ru_utime + after.ru_stime - cpu.ru_utime - cpu.ru_stime
    trained = sorted(log.read_text().split("\n")[:-1]) if log.exists() else []
    try:
        found = figures(report)
    except (OSError, ValueError, KeyError):
        found = None
    summary = [line for line in done.stdout.splitlines() if " in " in line and ("passed" in line or "failed" in line)]
    return {"name": name, "seconds": seconds, "cpu": cpu_seconds, "load": (load, os.getloadavg()[0]),
            "rc": done.returncode,
            "trained": trained, "figures": found,
            "summary": summary[-1].strip("= ") if summary else (done.stdout + done.stderr)[-600:]}


def _spin(seconds: float, out) -> None:
    end, count = time.perf_counter() + seconds, 0
    while time.perf_counter() < end:
        for _ in range(10_000):
            count += 1
    out.put(count)


def capacity(seconds: float = 4.0) -> float:
    """Work two busy processes do together over the work of one, in this session, now."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    one = context.Process(target=_spin, args=(seconds, results))
    one.start()
    one.join()
    alone = results.get()
    pair = [context.Process(target=_spin, args=(seconds, results)) for _ in range(2)]
    for process in pair:
        process.start()
    for process in pair:
        process.join()
    return (results.get() + results.get()) / alone


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=7)
    parser.add_argument("--epochs", type=int, default=4, help="epochs of the GRU (the sample project's is 12)")
    parser.add_argument("--quick", action="store_true", help="3 seeds, 1 epoch")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder and print it")
    args = parser.parse_args()
    if args.quick:
        args.seeds, args.epochs = 3, 1
    folder = Path(tempfile.mkdtemp(prefix="privleak-bench-own-"))
    project = make_project(folder)
    print(f"own GRU (sample project), {args.seeds} seeds x {args.epochs} epochs, exact pin exposure; "
          f"{os.cpu_count()} cores")
    print(f"CPU this session gets: 2 processes do {capacity():.2f}x the work of 1 (2.0 on 2 idle cores; less where "
          "the scheduler shares the cores per session, as Linux's autogroup does, and other sessions are busy)")
    runs = [run(project, "seq", args.seeds, args.epochs, "--privleak-train-processes=1"),
            run(project, "pool", args.seeds, args.epochs),
            run(project, "n2", args.seeds, args.epochs, "-n", "2")]
    for r in runs:
        counts = collections.Counter(" ".join(t.split()[1:]) for t in r["trained"])
        who = ", ".join(f"{process}: {count}" for process, count in sorted(counts.items()))
        print(f"  {r['name']:<5} {r['seconds']:7.1f} s wall {r['cpu']:7.1f} s CPU   load {r['load'][0]:4.1f} -> "
              f"{r['load'][1]:4.1f}   exit {r['rc']}   {r['summary']}\n        seeds trained by (process: seeds): "
              f"{who or '?'}")
    seq, pool, n2 = (r["seconds"] for r in runs)
    print(f"ratios: pool / seq {pool / seq:.2f}   n2 / seq {n2 / seq:.2f} (goal <= 0.6)   n2 / pool {n2 / pool:.2f}")
    print(f"CPU this session gets, again: 2 processes do {capacity():.2f}x the work of 1")
    same = runs[0]["figures"] is not None and all(r["figures"] == runs[0]["figures"] for r in runs)
    print(f"figures identical in the three runs: {same}")
    if args.keep:
        print(f"kept: {folder}")
    else:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
