"""The first minutes on a GPU, in one command (issue 35 item 5): run by ``bench/gpu_check.sh``.

Prints, side by side in one run, under a time budget (default 450 s, so the
whole command stays under 8 minutes on one GPU):

1. ``targets``: each built-in target's k seeds (default 7) trained through
   ``train_target_seeds`` on the CPU (one torch thread, as the targets train)
   and on the GPU, with the ratio;
2. ``suite``: the sample project's privacy suite cold, ``-n 0`` on the GPU and
   ``-n 2`` with both workers on it (``--privleak-devices=cuda:0,cuda:0``),
   with the ratio and whether the two runs gave the same figures;
3. ``stacked``: each recurrent target's k seeds stacked vs one by one, on the
   CPU (``bench/bench_seeds_cost.py``; said and skipped where that bench is
   not in this checkout).

Each section runs in its own process under its share of the budget: a section
that overruns is stopped, its finished rows kept, and the summary says so; a
section with too little budget left is skipped. ``--dry-run`` runs the same
code on the CPU with a tiny configuration ("cpu" stands in for the GPU): the
check CI runs, and the output format ``tests/test_gpu_check.py`` reads.

Internal use: ``python bench/gpu_check.py targets-worker ...`` trains and
prints one JSON line per target (the ``targets`` section's child process).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KINDS = ("joint-bilstm-crf", "lstm-lm", "ner-bilstm-crf", "causal-lm", "transformer-classifier")
#: Kinds the dry run trains: the recurrent ones train in a second on a tiny corpus (the transformers pretrain a
#: tiny BERT or build a GPT-2 first, which would make the CI check slow).
DRY_KINDS = ("joint-bilstm-crf", "lstm-lm")
#: (budget share, least seconds worth starting) of each section.
SECTIONS = {"targets": (0.34, 30.0), "suite": (0.44, 40.0), "stacked": (0.22, 20.0)}
STATUSES = ("ok", "failed", "timeout", "skipped")


# --------------------------------------------------------------------------- the targets section's child


def targets_worker(args: argparse.Namespace) -> int:
    """Train each kind's ``k`` seeds on each device, one JSON line a (kind, device): ``seconds`` or ``error``."""
    import torch

    from pytest_privleak.cache.targets import TargetCache
    from pytest_privleak.canaries import canary, inject_canaries
    from pytest_privleak.data.synthetic import generate_snips_like
    from pytest_privleak.data.synthetic_ner import generate_ner_like
    from pytest_privleak.targets import train_target
    from pytest_privleak.targets.seeds import train_target_seeds

    sizes = (60, 10, 10) if args.dry_run else (1500, 200, 300)
    nlu = inject_canaries(generate_snips_like(*sizes, seed=0), canary("pin", length=4), repeats=10 if args.dry_run
                          else 100)
    ner = generate_ner_like(*((60, 10, 10) if args.dry_run else (1000, 100, 100)), seed=0)
    folder = Path(tempfile.mkdtemp(prefix="privleak-gpu-check-"))
    try:
        for kind in args.kinds.split(","):
            data = ner if kind == "ner-bilstm-crf" else nlu
            for slot, device in enumerate(args.devices.split(",")):
                cache = TargetCache(folder / f"{kind}-{slot}")
                row = {"kind": kind, "slot": slot, "device": device, "k": args.k}
                try:
                    # warm-up: CUDA's start, the tiny BERT's pretraining, the vocabulary: not the seeds' cost
                    train_target(kind, data, device=device, cache=cache, seed=10_000, epochs=args.epochs)
                    if device.startswith("cuda"):
                        torch.cuda.synchronize()
                    began = time.perf_counter()
                    train_target_seeds(kind, data, seeds=args.k, seed=0, device=device, cache=cache,
                                       epochs=args.epochs)
                    if device.startswith("cuda"):
                        torch.cuda.synchronize()
                    row["seconds"] = round(time.perf_counter() - began, 2)
                except Exception as exc:  # noqa: BLE001 - one kind's failure is a row of the table, not the end
                    row["error"] = f"{type(exc).__name__}: {str(exc)[:160]}"
                print(json.dumps(row), flush=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


# --------------------------------------------------------------------------- running a section


class Section:
    """One numbered section's output, status and time."""

    def __init__(self, number: int, total: int, name: str, title: str) -> None:
        self.name, self.status, self.seconds, self.note = name, "skipped", 0.0, ""
        print(f"== [{number}/{total}] {name}: {title}", flush=True)

    def say(self, line: str) -> None:
        print(f"   {line}", flush=True)

    def finish(self, status: str, seconds: float, note: str = "") -> None:
        assert status in STATUSES
        self.status, self.seconds, self.note = status, seconds, note
        if note:
            self.say(note)


def run_lines(cmd: list[str], timeout: float, on_line, *, cwd: Path | None = None,
              env: dict | None = None) -> tuple[str, float, list[str]]:
    """Run ``cmd``, handing each stdout line to ``on_line`` as it comes; (status, seconds, last lines)."""
    began = time.perf_counter()
    process = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               start_new_session=True)
    tail: list[str] = []
    timer = _Timer(process, timeout)
    try:
        for line in process.stdout:
            line = line.rstrip("\n")
            tail = (tail + [line])[-12:]
            on_line(line)
    finally:
        timer.cancel()
        process.wait()
    seconds = time.perf_counter() - began
    if timer.fired:
        return "timeout", seconds, tail
    return ("ok" if process.returncode == 0 else "failed"), seconds, tail


class _Timer:
    """Stop a process group after ``timeout`` seconds."""

    def __init__(self, process: subprocess.Popen, timeout: float) -> None:
        import threading

        self.process, self.fired = process, False
        self.timer = threading.Timer(max(1.0, timeout), self._stop)
        self.timer.daemon = True
        self.timer.start()

    def _stop(self) -> None:
        import signal

        self.fired = True
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
        except OSError:
            pass

    def cancel(self) -> None:
        self.timer.cancel()


def python_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    env["PYTHONUNBUFFERED"] = "1"
    return env


# --------------------------------------------------------------------------- the sections


def section_targets(section: Section, args, gpu: str, budget: float) -> None:
    kinds = DRY_KINDS if args.dry_run else KINDS
    devices = ["cpu", gpu]
    section.say(f"{'kind':<24}{'k':>3}{'cpu s':>10}{(gpu + ' s'):>12}{'ratio':>9}")
    rows: dict[str, dict[str, dict]] = {}

    def on_line(line: str) -> None:
        try:
            row = json.loads(line)
        except ValueError:
            return
        if not isinstance(row, dict) or "kind" not in row:
            return
        rows.setdefault(row["kind"], {})[row["slot"]] = row
        done = rows[row["kind"]]
        if len(done) == len(devices):
            cells = [f"{done[i]['seconds']:.1f}" if "seconds" in done[i] else "error" for i in (0, 1)]
            ratio = (f"{done[1]['seconds'] / done[0]['seconds']:.2f}"
                     if all("seconds" in done[i] for i in (0, 1)) and done[0]["seconds"] > 0 else "-")
            section.say(f"{row['kind']:<24}{row['k']:>3}{cells[0]:>10}{cells[1]:>12}{ratio:>9}")
            for i in (0, 1):
                if "error" in done[i]:
                    section.say(f"  {row['kind']} on {devices[i]}: {done[i]['error']}")

    cmd = [sys.executable, str(Path(__file__).resolve()), "targets-worker", "--kinds", ",".join(kinds),
           "--devices", ",".join(devices), "--k", str(args.k), "--epochs", "1"]
    if args.dry_run:
        cmd.append("--dry-run")
    env = python_env()
    env.setdefault("OMP_NUM_THREADS", "1")
    status, seconds, tail = run_lines(cmd, budget, on_line, env=env)
    missing = [k for k in kinds if len(rows.get(k, {})) < len(devices)]
    note = f"not measured: {', '.join(missing)}" if missing else ""
    if status == "failed":
        note = (note + "; " if note else "") + "last lines: " + " | ".join(tail[-3:])
    section.finish(status, seconds, note)


def copy_sample(into: Path) -> Path:
    project = into / "sample_project"
    shutil.copytree(ROOT / "sample_project", project, ignore=shutil.ignore_patterns(
        ".privleak-cache", "privleak-report", "__pycache__", ".pytest_cache"))
    return project


def plugin_args() -> list[str]:
    """``-p pytest_privleak.plugin`` where the package is not installed (a checkout carried to the GPU machine)."""
    from importlib.metadata import entry_points

    installed = any(e.value.startswith("pytest_privleak") for e in entry_points(group="pytest11"))
    return [] if installed else ["-p", "pytest_privleak.plugin"]


def report_figures(report: Path) -> list | None:
    try:
        data = json.loads((report / "report.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return sorted((t.get("nodeid", ""), r.get("name"), r.get("label"), r.get("value"))
                  for t in data.get("tests", []) for r in t.get("results", []))


def section_suite(section: Section, args, gpu: str, budget: float) -> None:
    folder = Path(tempfile.mkdtemp(prefix="privleak-gpu-suite-"))
    project = copy_sample(folder)
    env = python_env()
    env["PRIVLEAK_SEEDS"] = str(args.suite_seeds)
    env.pop("OMP_NUM_THREADS", None)
    selection = ["-k", "unary or ome"] if args.dry_run else []
    pair = f"{gpu},{gpu}"
    runs = [("-n 0", ["-n", "0", f"--privleak-device={gpu}"]),
            ("-n 2", ["-n", "2", f"--privleak-devices={pair}"])]
    section.say(f"seeds per target {args.suite_seeds}; {'tests -k ' + repr(selection[1]) if selection else 'all tests'}")
    section.say(f"{'run':<38}{'seconds':>9}{'exit':>6}  summary")
    results, total, status = {}, 0.0, "ok"
    try:
        for number, (name, extra) in enumerate(runs):
            left = min(budget - total, budget / 2 if number == 0 else budget)   # the first run leaves half
            if left < 10:
                status = "timeout"
                section.say(f"{name}: not run, no budget left")
                break
            report = folder / f"report{name.replace(' ', '')}"
            cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *plugin_args(),
                   f"--privleak-cache-dir={folder / ('cache' + name.replace(' ', ''))}",
                   f"--privleak-report={report}", *selection, *extra]
            lines: list[str] = []
            run_status, seconds, tail = run_lines(cmd, left, lines.append, cwd=project, env=env)
            total += seconds
            summary = next((ln.strip("= ") for ln in reversed(lines) if " in " in ln and (
                "passed" in ln or "failed" in ln or "error" in ln)), (tail[-1] if tail else ""))
            label = f"{name} ({extra[-1]})"
            section.say(f"{label:<38}{seconds:>9.1f}{('-' if run_status == 'timeout' else 0 if run_status == 'ok' else 1):>6}"
                        f"  {run_status if run_status != 'ok' else summary}")
            results[name] = (seconds, report_figures(report))
            if run_status != "ok":
                status = run_status
                section.say("last lines: " + " | ".join(tail[-4:]))
        if len(results) == 2:
            (n0, f0), (n2, f2) = results["-n 0"], results["-n 2"]
            section.say(f"-n 2 / -n 0: {n2 / n0:.2f}; the same figures in both runs: {f0 is not None and f0 == f2}")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    section.finish(status, total)


def section_stacked(section: Section, args, budget: float) -> None:
    bench = ROOT / "bench" / "bench_seeds_cost.py"
    if not bench.is_file():
        section.finish("skipped", 0.0, "bench/bench_seeds_cost.py is not in this checkout (issue 35 item 1): skipped")
        return
    cmd = [sys.executable, str(bench), "--k", str(args.k), "--epochs", "1"]
    if args.dry_run:
        cmd = [sys.executable, str(bench), "--help"]
        section.say("dry run: only its --help (the stacked bench trains on the full corpus)")
    else:
        cmd.append("--skip-old7")
    env = python_env()
    env.setdefault("OMP_NUM_THREADS", "1")
    status, seconds, tail = run_lines(cmd, budget, lambda line: section.say(line) if line.strip() else None,
                                      env=env)
    section.finish(status, seconds, "" if status == "ok" else f"{status}: " + " | ".join(tail[-2:]))


# --------------------------------------------------------------------------- the driver


def describe(gpu: str) -> str:
    import torch

    device = "cpu (dry run: stands in for the GPU)" if gpu == "cpu" else \
        f"{gpu} ({torch.cuda.get_device_name(0)})"
    try:
        rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=10).stdout.strip() or "?"
    except (OSError, subprocess.SubprocessError):
        rev = "?"
    return (f"gpu_check: pytest-privleak {rev} | python {platform.python_version()} | torch {torch.__version__} | "
            f"device {device} | {os.cpu_count()} cores")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="on the CPU, tiny configuration (CI)")
    parser.add_argument("--budget", type=float, default=None, help="seconds for all sections (default 450; "
                                                                   "dry run 240)")
    parser.add_argument("--k", type=int, default=None, help="seeds per target (default 7; dry run 2)")
    parser.add_argument("--suite-seeds", type=int, default=1,
                        help="training seeds per target in the sample project's suite (default 1: its cold run "
                             "at 7 seeds does not fit the budget)")
    parser.add_argument("--only", default=",".join(SECTIONS), help="sections to run, in order (default: all)")
    args = parser.parse_args(argv)
    args.k = args.k or (2 if args.dry_run else 7)
    budget = args.budget or (240.0 if args.dry_run else 450.0)
    began = time.perf_counter()
    import torch

    if args.dry_run:
        gpu = "cpu"
    elif torch.cuda.is_available():
        gpu = "cuda:0"
    else:
        print("gpu_check: no CUDA device is visible to torch "
              f"{torch.__version__}; on a machine without a GPU run: bash bench/gpu_check.sh --dry-run")
        return 2
    print(describe(gpu) + f" | mode {'dry-run' if args.dry_run else 'full'} | budget {budget:.0f} s", flush=True)
    names = [n for n in args.only.split(",") if n]
    unknown = sorted(set(names) - set(SECTIONS))
    if unknown:
        parser.error(f"--only: unknown section(s) {', '.join(unknown)}; known: {', '.join(SECTIONS)}")
    done: list[Section] = []
    titles = {"targets": f"k={args.k} seeds of each built-in target, CPU (1 thread) vs {gpu}",
              "suite": f"the sample project's suite cold: -n 0 on {gpu}, -n 2 on {gpu},{gpu}",
              "stacked": f"k={args.k} seeds stacked vs one by one, CPU (bench/bench_seeds_cost.py)"}
    for number, name in enumerate(names, start=1):
        section = Section(number, len(names), name, titles[name])
        left = budget - (time.perf_counter() - began)
        remaining_share = sum(SECTIONS[n][0] for n in names[number - 1:])
        mine = left * SECTIONS[name][0] / remaining_share if remaining_share else left
        if mine < SECTIONS[name][1] and not args.dry_run:
            section.finish("skipped", 0.0, f"skipped: {left:.0f} s of the budget left")
        elif name == "targets":
            section_targets(section, args, gpu, mine)
        elif name == "suite":
            section_suite(section, args, gpu, mine)
        else:
            section_stacked(section, args, mine)
        done.append(section)
    print("== summary", flush=True)
    print(f"   {'section':<10}{'status':<9}{'seconds':>9}")
    for section in done:
        print(f"   {section.name:<10}{section.status:<9}{section.seconds:>9.1f}")
    total = time.perf_counter() - began
    print(f"gpu_check: done in {total:.1f} s (budget {budget:.0f} s)", flush=True)
    return 0 if all(s.status in ("ok", "skipped") for s in done) else 1


def worker_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kinds", required=True)
    parser.add_argument("--devices", required=True)
    parser.add_argument("--k", type=int, required=True)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--dry-run", action="store_true")
    return targets_worker(parser.parse_args(argv))


if __name__ == "__main__":
    if sys.argv[1:2] == ["targets-worker"]:
        sys.exit(worker_main(sys.argv[2:]))
    sys.exit(main())
