"""bench/gpu_check.sh (issue 35 item 5): its CPU dry run, the check CI runs, and the output format it prints.

The real run needs a GPU machine; the dry run runs the same code on the CPU with a tiny configuration.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEADER = re.compile(r"^gpu_check: pytest-privleak \S+ \| python [\d.]+ \| torch \S+ \| device cpu \(dry run: stands "
                    r"in for the GPU\) \| \d+ cores \| mode dry-run \| budget \d+ s$")
ROW = re.compile(r"^   (joint-bilstm-crf|lstm-lm) +2 +\d+\.\d +\d+\.\d +\d+\.\d\d$")
DONE = re.compile(r"^gpu_check: done in \d+\.\d s \(budget \d+ s\)$")


def gpu_check(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHON=sys.executable, OMP_NUM_THREADS="1")
    return subprocess.run(["bash", str(ROOT / "bench" / "gpu_check.sh"), *args], capture_output=True, text=True,
                          env=env, timeout=timeout)


def summary(lines: list[str]) -> dict[str, str]:
    start = lines.index("== summary")
    assert re.fullmatch(r"   section +status +seconds", lines[start + 1])
    rows = {}
    for line in lines[start + 2:-1]:
        name, status, seconds = line.split()
        assert float(seconds) >= 0
        rows[name] = status
    return rows


def test_the_dry_run_of_the_targets_section_prints_its_table_and_the_summary():
    done = gpu_check("--dry-run", "--only", "targets")
    lines = done.stdout.splitlines()
    assert done.returncode == 0, done.stdout + done.stderr
    assert HEADER.match(lines[0]), lines[0]
    assert lines[1] == "== [1/1] targets: k=2 seeds of each built-in target, CPU (1 thread) vs cpu"
    assert re.fullmatch(r"   kind +k +cpu s +cpu s +ratio", lines[2])
    assert [ROW.match(line).group(1) for line in lines[3:5]] == ["joint-bilstm-crf", "lstm-lm"], lines[3:5]
    assert summary(lines) == {"targets": "ok"} and DONE.match(lines[-1])


def test_a_section_that_overruns_its_budget_is_stopped_and_reported_as_such():
    done = gpu_check("--dry-run", "--only", "targets", "--budget", "1")
    lines = done.stdout.splitlines()
    assert done.returncode == 1 and summary(lines) == {"targets": "timeout"} and DONE.match(lines[-1])
    assert any(line.startswith("   not measured: joint-bilstm-crf") for line in lines)


def test_without_a_gpu_the_real_run_says_to_use_the_dry_run():
    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the real run would start")
    done = gpu_check()
    assert done.returncode == 2 and "no CUDA device is visible" in done.stdout
    assert "bash bench/gpu_check.sh --dry-run" in done.stdout


@pytest.mark.slow
def test_the_whole_dry_run_runs_every_section_within_its_budget():
    done = gpu_check("--dry-run")
    lines = done.stdout.splitlines()
    assert done.returncode == 0, done.stdout + done.stderr
    assert HEADER.match(lines[0])
    assert [line.split(":")[0] for line in lines if line.startswith("== [")] == [
        "== [1/3] targets", "== [2/3] suite", "== [3/3] stacked"]
    assert any(re.fullmatch(r"   -n 2 / -n 0: \d+\.\d\d; the same figures in both runs: True", line) for line in lines)
    rows = summary(lines)
    assert list(rows) == ["targets", "suite", "stacked"] and rows["targets"] == rows["suite"] == "ok"
    assert rows["stacked"] == ("ok" if (ROOT / "bench" / "bench_seeds_cost.py").is_file() else "skipped")
    assert DONE.match(lines[-1])
