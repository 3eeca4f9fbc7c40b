"""``python -I -m pytest_privleak gate --baseline B REPORT...``: the gate's verdict outside the run under review.

The in-process gate runs in the process of the tests it judges, so code in that process (a conftest, the
model under test) can reach it. This command reaches the same verdict from the stored reports alone, in a
process that imports no project code and no conftest (``-I``: not even the working folder is on the path)
and never runs pytest's collection: the sample workflow runs it in a job that never checks the branch out.

Each REPORT (a ``report.json``, or a folder holding one, as ``actions/download-artifact`` lays out the
shards) is untrusted data, read by :func:`..reader.load_report` (a regular file, size-capped, strict JSON:
no duplicate keys, no bare NaN, no number too large for a float, the fields the gate reads well formed) and,
when ``PRIVLEAK_CACHE_HMAC_KEY`` is set, with a valid signature. The reports are merged as
``--privleak-merge-reports`` merges them (:func:`..merge.merge_reports`: one complete split, no test twice
with different figures), then gated by :func:`..gate.compare`, the in-process gate's own function: audit
strength first, then the figures, with the baseline's tolerances (``--tolerance`` from this command line is
the only other source). What the reports say about their own verdict (their ``baseline`` part) is ignored.

Exit status as pytest's: 0 passed, 1 a regression or an undeclared leak in the reports, 4 a report or
baseline that cannot be read or trusted, a weaker audit, a missing or inconclusive entry, nothing compared.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 4
REPORT_NAME = "report.json"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse exits 2; a usage error of the gate is 4, as pytest's
        self.print_usage(sys.stderr)
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        raise SystemExit(EXIT_USAGE)


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -I -m pytest_privleak gate",
                description="Merge pytest-privleak reports and gate them on a baseline, reading them as untrusted "
                            "data and importing no project code.")
    p.add_argument("reports", nargs="+", metavar="REPORT",
                   help="report.json files, or folders each holding one (e.g. the shards' report folders)")
    p.add_argument("--baseline", metavar="PATH",
                   help="the baseline saved on the main branch; without it the reports are only merged and checked")
    p.add_argument("--allow-missing", action="store_true",
                   help="list baseline entries with no (conclusive) result instead of failing on them")
    p.add_argument("--tolerance", action="append", default=[], metavar="ATTACK.METRIC=T",
                   help="tolerance for baseline entries that store none (repeatable)")
    p.add_argument("--unsigned-ok", action="store_true",
                   help="accept signed reports and baseline although PRIVLEAK_CACHE_HMAC_KEY is not set to verify them")
    p.add_argument("--report", metavar="DIR", help="write the merged, gated report (report.json, index.html, "
                                                   "summary.md) to DIR")
    p.add_argument("--save-baseline", metavar="PATH", help="write the merged figures as the next baseline to PATH")
    return p


class GateInputError(ValueError):
    """A report or baseline the command cannot trust; the message names the file and the fix."""


def _report_path(given: str) -> Path:
    path = Path(given)
    return path / REPORT_NAME if path.is_dir() else path


def read_reports(given: list[str], *, unsigned_ok: bool) -> list[tuple[str, dict[str, Any]]]:
    """``(name, report)`` for each REPORT, each read as untrusted data and its signature checked."""
    from ..baseline_file import check_signature
    from ..model import ReportFileError
    from ..reader import load_report

    out = []
    for name in given:
        path = _report_path(name)
        try:
            data = load_report(path)
            check_signature(data, path, unsigned_ok=unsigned_ok)
        except ReportFileError as exc:
            text = str(exc).replace("privleak baseline ", "privleak report ", 1)
            raise GateInputError(f"{text.split('; regenerate it', 1)[0]}; re-run the job that wrote it (a report "
                                 "is written by pytest --privleak-report=DIR)") from None
        out.append((name, data))
    return out


def leak_lines(report: dict[str, Any]) -> list[str]:
    """An undeclared failing result, or a swallowed leak, in the reports fails the gate too: the shard job's
    own exit status comes from the process under review."""
    from ...results import _fmt
    from ..model import figure, is_expected_leak, swallowed_leaks

    lines = []
    for test in report["tests"]:
        for r in test["results"]:
            if r.get("verdict") == "FAIL" and not is_expected_leak(test["outcome"], r):
                lines.append(f"privleak: LEAK {r['key']} = {_fmt(figure(r['value']))} violates its limit "
                             f"{_fmt(figure(r.get('threshold')))}")
    for test, r in swallowed_leaks(report):
        if r.get("verdict") != "FAIL":
            lines.append(f"privleak: INCONCLUSIVE {r['key']} was not fully measured (a budget, ties, a scorer "
                         "read the wrong way round: its inconclusive line says which) without "
                         "allow_inconclusive=True, yet its test " + str(test["outcome"]))
    return lines


def run(args: argparse.Namespace, out=sys.stdout) -> int:
    """The command: read, merge, gate, write; the exit status."""
    from ...results import encode
    from ..baseline_file import baseline_to_save, load_baseline, unverified_note
    from ..gate import compare, gate_exit, gate_lines, parse_tolerances
    from ..keys import key_problems
    from ..merge import MergeError, merge_reports
    from ..model import ReportFileError
    from ..printable import printable

    try:
        tolerances = parse_tolerances(args.tolerance, option="--tolerance")
        baseline = (load_baseline(args.baseline, unsigned_ok=args.unsigned_ok)
                    if args.baseline is not None else None)
        merged = merge_reports(read_reports(args.reports, unsigned_ok=args.unsigned_ok))
    except (GateInputError, MergeError, ReportFileError, ValueError) as exc:
        out.write(printable(f"ERROR: {exc}") + "\n")
        written = _refusal(args, str(exc))
        if written is not None:
            out.write(printable(f"privleak report: {written} says why") + "\n")
        return EXIT_USAGE
    lines = [f"privleak gate: {len(merged['tests'])} test(s) from {len(args.reports)} report(s)"]
    status = EXIT_OK
    if baseline is not None:
        comparison = compare(merged, baseline, tolerances, str(args.baseline), allow_missing=args.allow_missing,
                             errors=key_problems(merged["tests"]))
        comparison["notes"] += [note for note in (unverified_note(baseline, args.baseline),) if note]
        merged["baseline"] = encode(comparison)
        lines += gate_lines(comparison)
        decided = gate_exit(comparison)
        status = EXIT_OK if decided is None else int(decided)
    leaks = leak_lines(merged)
    lines += leaks
    if leaks and status == EXIT_OK:
        status = EXIT_FAILED
    if args.save_baseline is not None:
        saved, problems = baseline_to_save(merged, tolerances)
        if problems:
            lines += [f"privleak baseline NOT saved to {args.save_baseline}: {p}" for p in problems]
            status = status or EXIT_USAGE
        else:
            from ..writer import write_baseline

            write_baseline(saved, args.save_baseline)
            lines.append(f"privleak baseline saved: {args.save_baseline}")
    if args.report is not None:
        from ..baseline_file import sign
        from ..writer import write_report

        written = write_report(sign(merged), args.report)
        lines.append(f"privleak report: {written['html']} (also {written['json'].name}, {written['markdown'].name})")
    out.write("\n".join(printable(line) for line in lines) + "\n")
    return status


def _refusal(args: argparse.Namespace, error: str) -> Path | None:
    """With ``--report``: a report with no tests whose gate part names ``error`` (so CI's job summary says why
    the gate stopped); ``None`` when not asked or the folder cannot be written."""
    if args.report is None:
        return None
    from ...results import encode
    from ..gate import failed_comparison
    from ..model import build_report
    from ..writer import write_report

    report = build_report([], [], seed=0, xdist=False)
    report["baseline"] = encode(failed_comparison(str(args.baseline or "(no baseline)"), error))
    try:
        return write_report(report, args.report)["markdown"]
    except OSError:
        return None


def main(argv: list[str] | None = None) -> int:
    """``python -m pytest_privleak gate ...``; ``argv`` without the program name."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] != "gate":
        sys.stderr.write("usage: python -I -m pytest_privleak gate [--baseline PATH] REPORT...\n"
                         "(the only command: gate stored reports on a baseline outside the run under review)\n")
        return EXIT_USAGE
    return run(parser().parse_args(argv[1:]))
