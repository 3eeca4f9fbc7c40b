"""Merge the report.json of several CI shards into one report (``pytest --privleak-merge-reports DIR...``).

Each shard's report is read with the report model (:func:`reader.load_report`:
strict JSON, version, structure), then the shards must agree: the same seed,
and, when they were split by ``--privleak-shard``, the same number of shards
and durations file with every shard present once. A test or result key found
in two shards is kept once when both shards measured the same figures (where
it ran, wall-clock ``seconds`` and whether it came from the result cache
aside), and refused otherwise (a test ran on two shards and the merge cannot
tell which figure is the run's). The merged report is built by :func:`model.build_report`
(summary recomputed); each test's and worker's id is prefixed with the folder
it came from, and ``run.merged_from`` lists the folders.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from .model import ReportFileError, build_report
from .reader import load_report

REPORT_NAME = "report.json"
#: Result fields that say where a result ran, not what it measured; they may differ between shards.
PLACE_FIELDS = ("device", "host")
#: Wall-clock timings inside a result's ``extra`` and ``target`` (e.g. ``seconds``): different every run.
TIMING_KEYS = ("seconds",)
_SHARD_FIX = ("re-run the shard jobs with the same options and --privleak-report=DIR, and pass every shard's "
              "folder once")


class MergeError(ValueError):
    """Shard reports that cannot be merged; the message names the folder(s), the entry and the fix."""


def _reason(exc: ReportFileError, path: Path) -> str:
    """What :func:`load_report` found wrong, without its advice about baselines (a shard is not one)."""
    text = str(exc)
    head = f"privleak baseline {path} "
    if text.startswith(head):
        text = text[len(head):]
    for tail in ("; fix that entry or regenerate it", "; regenerate it"):
        if tail in text:
            text = text[:text.index(tail)]
    return text


def load_shard(folder: str | Path) -> dict[str, Any]:
    """``folder/report.json`` through the report model; :class:`MergeError` naming the file and the fix."""
    folder = Path(folder)
    path = folder / REPORT_NAME
    if not folder.is_dir():
        raise MergeError(f"--privleak-merge-reports: {folder} is not a folder; give the folders the shard jobs "
                         f"wrote with --privleak-report=DIR (each holds a {REPORT_NAME})")
    if not path.is_file():
        raise MergeError(f"--privleak-merge-reports: {path} does not exist, so that shard's results are missing "
                         "(did its job stop before writing the report, or was its artifact not downloaded?); "
                         f"{_SHARD_FIX}")
    try:
        return load_report(path)
    except ReportFileError as exc:
        raise MergeError(f"--privleak-merge-reports: shard report {path} cannot be merged: {_reason(exc, path)}; "
                         f"{_SHARD_FIX}") from None


def _check_seeds(shards: list[tuple[str, dict[str, Any]]]) -> int | None:
    first_dir, first = shards[0]
    seed = first["run"].get("seed")
    for folder, report in shards[1:]:
        if report["run"].get("seed") != seed:
            raise MergeError(f"--privleak-merge-reports: {first_dir} ran with seed {seed!r} but {folder} with seed "
                             f"{report['run'].get('seed')!r}, so their figures do not belong to one run; run every "
                             "shard with the same --privleak-seed")
    return seed


def _check_split(shards: list[tuple[str, dict[str, Any]]]) -> None:
    """Shards split by ``--privleak-shard`` must be one complete split: same N, same durations, each I once."""
    infos = [(folder, report["run"].get("shard")) for folder, report in shards]
    sharded = [(f, i) for f, i in infos if i]
    if not sharded:
        return
    if len(sharded) != len(infos):
        plain = next(f for f, i in infos if not i)
        raise MergeError(f"--privleak-merge-reports: {sharded[0][0]} was split with --privleak-shard but {plain} "
                         "was not, so tests may have run on both or on neither; run every shard with "
                         "--privleak-shard=I/N")
    first_dir, first = sharded[0]
    seen: dict[int, str] = {}
    for folder, info in sharded:
        if info.get("count") != first.get("count"):
            raise MergeError(f"--privleak-merge-reports: {first_dir} is shard {first.get('index')}/"
                             f"{first.get('count')} but {folder} is shard {info.get('index')}/{info.get('count')}; "
                             "every shard of one run must use the same N")
        if info.get("durations") != first.get("durations"):
            raise MergeError(f"--privleak-merge-reports: {first_dir} and {folder} were split with different "
                             "--privleak-shard-durations files (or one without), so their splits differ and tests "
                             "may have run twice or not at all; give every shard the same file (or none)")
        if info.get("index") in seen:
            raise MergeError(f"--privleak-merge-reports: {seen[info['index']]} and {folder} are both shard "
                             f"{info.get('index')}/{info.get('count')}; pass each shard's folder once")
        seen[info.get("index")] = folder
    missing = sorted(set(range(1, int(first.get("count") or 0) + 1)) - set(seen))
    if missing:
        names = ", ".join(f"{i}/{first.get('count')}" for i in missing)
        raise MergeError(f"--privleak-merge-reports: shard(s) {names} are missing (given: "
                         f"{', '.join(f for f, _ in sharded)}), so their tests would be missing from the merged "
                         f"report; {_SHARD_FIX}")


def _measured(result: dict[str, Any]) -> dict[str, Any]:
    """What a result measured: without where it ran, how long it took, and whether this run computed it or
    loaded it from the result cache (the evidence line :data:`~pytest_privleak.cache.results.LOADED_EVIDENCE`)."""
    from ..cache.results import LOADED_EVIDENCE

    out = {k: v for k, v in result.items() if k not in PLACE_FIELDS}
    for name in ("extra", "target"):
        if isinstance(out.get(name), dict):
            out[name] = {k: v for k, v in out[name].items() if k not in TIMING_KEYS}
    if isinstance(out.get("evidence"), dict):
        out["evidence"] = {k: v for k, v in out["evidence"].items() if k != LOADED_EVIDENCE}
    return out


def _difference(a: dict[str, Any], b: dict[str, Any]) -> str:
    names = sorted(set(a) | set(b), key=lambda k: (k != "value", k))
    diff = [k for k in names if a.get(k) != b.get(k)]
    return ", ".join(f"{k} {a.get(k)!r} vs {b.get(k)!r}" for k in diff[:3])


def _same_test(kept: tuple[str, dict[str, Any]], other: tuple[str, dict[str, Any]]) -> None:
    """Refuse one test found in two shards unless both measured exactly the same."""
    (dir_a, a), (dir_b, b) = kept, other
    fix = ("each test must run on one shard only: check the shards' --privleak-shard (or -k) options; if a shard "
           "was re-run, pass only one of its folders")
    if a["outcome"] != b["outcome"]:
        raise MergeError(f"--privleak-merge-reports: test {a['nodeid']!r} is in {dir_a} ({a['outcome']}) and in "
                         f"{dir_b} ({b['outcome']}) with different outcomes; {fix}")
    results_a = {r["key"]: r for r in a["results"]}
    results_b = {r["key"]: r for r in b["results"]}
    for key in sorted(set(results_a) | set(results_b)):
        ra, rb = results_a.get(key), results_b.get(key)
        if ra is None or rb is None:
            where, absent = (dir_b, dir_a) if ra is None else (dir_a, dir_b)
            raise MergeError(f"--privleak-merge-reports: result {key!r} is in {where} but not in {absent}, though "
                             f"both ran test {a['nodeid']!r}; {fix}")
        if _measured(ra) != _measured(rb):
            raise MergeError(f"--privleak-merge-reports: result {key!r} is in {dir_a} and in {dir_b} with different "
                             f"figures ({_difference(_measured(ra), _measured(rb))}), so the merge cannot tell which "
                             f"one this run measured; {fix}")


def _prefixed(folder: str, worker: str | None) -> str:
    return f"{folder}/{worker}" if worker else folder


def merge_reports(shards: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """One report from ``(folder, report)`` pairs (in the order given); :class:`MergeError` when they disagree."""
    if not shards:
        raise MergeError("--privleak-merge-reports needs at least one folder; give the shard jobs' report folders")
    seed = _check_seeds(shards)
    _check_split(shards)
    tests: dict[str, tuple[str, dict[str, Any]]] = {}
    workers: list[dict[str, Any]] = []
    for folder, report in shards:
        for test in report["tests"]:
            if test["nodeid"] in tests:
                _same_test(tests[test["nodeid"]], (folder, test))
                continue
            tests[test["nodeid"]] = (folder, {**test, "worker": _prefixed(folder, test.get("worker"))})
        workers += [{**w, "id": _prefixed(folder, w.get("id"))} for w in report["run"].get("workers", [])]
    merged = build_report([tests[n][1] for n in sorted(tests)], workers, seed=seed,
                          xdist=any(r["run"].get("xdist") for _, r in shards))
    merged["run"]["merged_from"] = [
        {"folder": folder, "tests": len(report["tests"]), "created": report.get("created"),
         "shard": (f"{report['run']['shard'].get('index')}/{report['run']['shard'].get('count')}"
                   if report["run"].get("shard") else None)}
        for folder, report in shards]
    return merged
