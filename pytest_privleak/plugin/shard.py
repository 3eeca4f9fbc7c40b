"""CI sharding (``--privleak-shard=i/n``) and merging shard reports (``--privleak-merge-reports``), issue 11 item 4.

A shard keeps the tests of its groups (:mod:`pytest_privleak.distribute.sharding`) and
deselects the rest; the report it writes names the shard (``run.shard``), so
the merge can check that every shard of one split is there exactly once.
``pytest --privleak-merge-reports DIR...`` collects nothing: it merges the
shards' report.json (:mod:`report.merge`), and the result is gated, written
and saved exactly as a normal run's (``ResultCollector.finish``), so one
merged verdict gates the pull request.

Durations come from their own option, ``--privleak-shard-durations``, not from
``--privleak-baseline``: a shard must not gate (compared with the whole
baseline, every other shard's entries would be "missing"), yet it needs the
durations of main's last run, which is that same file.
"""
from __future__ import annotations

import sys

import pytest

SHARD_KEY = pytest.StashKey[dict]()
#: Test durations for ordering xdist's groups longest first (:class:`~pytest_privleak.distribute.scheduling.GroupScheduling`).
DURATIONS_KEY = pytest.StashKey[dict]()


def pytest_addoption(parser: pytest.Parser) -> None:
    """pytest, at start-up: register the shard, durations and merge options."""
    group = parser.getgroup("privleak", "privacy leakage assertions (pytest-privleak)")
    group.addoption("--privleak-shard", dest="privleak_shard", default=None, metavar="I/N",
                    help="run only shard I of N (1 <= I <= N): tests sharing an xdist_group marker, else a "
                         "module, stay on one shard; every shard computes the same split")
    group.addoption("--privleak-shard-durations", dest="privleak_shard_durations", default=None, metavar="PATH",
                    help="balance the shards, and under -n N order the xdist groups longest first, by the test "
                         "durations in this report.json (e.g. main's merged report; pytest-split's "
                         ".test_durations also works) instead of one unit per test")
    group.addoption("--privleak-merge-reports", dest="privleak_merge_reports", nargs="+", default=None,
                    metavar="DIR",
                    help="collect nothing: merge the report.json of these shard report folders into one report "
                         "(--privleak-report=DIR), gated by --privleak-baseline as one run")


def _shard_settings(config: pytest.Config) -> dict | None:
    """``{"shard": Shard, "durations": dict | None, "digest": str | None}`` or ``None``; usage errors name the option."""
    from ..distribute.sharding import ShardError, parse_shard
    from ..report.reader import read_durations

    value, path = config.getoption("privleak_shard"), config.getoption("privleak_shard_durations")
    if value is None and hasattr(config, "workerinput"):
        return None  # the controller orders the groups; a worker (maybe on another host) needs no durations
    if value is None and path is not None and not _under_xdist(config):
        raise pytest.UsageError(f"--privleak-shard-durations={path!r} is given without --privleak-shard or -n; add "
                                "--privleak-shard=I/N (balance shards) or -n N (order xdist groups longest first), "
                                "or leave the durations out")
    try:
        shard = parse_shard(value) if value is not None else None
        durations, digest = read_durations(path) if path is not None else (None, None)
    except ShardError as exc:
        raise pytest.UsageError(str(exc)) from None
    if durations is not None:
        config.stash[DURATIONS_KEY] = durations
    if shard is None:
        return None
    return {"shard": shard, "durations": durations, "digest": digest, "plan": None}


def _under_xdist(config: pytest.Config) -> bool:
    """An xdist controller or worker (``-n N``, ``--tx``, ``--dist``)."""
    if hasattr(config, "workerinput"):
        return True
    return getattr(config.option, "dist", "no") not in ("no", None) or bool(getattr(config.option, "tx", None)) \
        or bool(getattr(config.option, "numprocesses", None))


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """pytest, at configure (first): read ``--privleak-shard`` and its durations file, unless merging reports."""
    if config.getoption("privleak_merge_reports"):
        return
    settings = _shard_settings(config)
    if settings is not None:
        from .settings import SHARD_REPORT_KEY

        config.stash[SHARD_KEY] = settings
        # named in the report (so the merge can check it has the whole split), before any report hook runs
        config.stash[SHARD_REPORT_KEY] = {"index": settings["shard"].index, "count": settings["shard"].count,
                                          "durations": settings["digest"]}


@pytest.hookimpl(trylast=True)  # after -k/-m: the selected tests are split
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """pytest, after collection (last): keep only this shard's groups of tests and deselect the rest."""
    settings = config.stash.get(SHARD_KEY, None)
    if settings is None:
        return
    from ..distribute.sharding import group_of, split, xdist_group_names

    plan = split({item.nodeid: group_of(item.nodeid, xdist_group_names(item)) for item in items},
                 settings["shard"], settings["durations"])
    settings["plan"] = plan
    if hasattr(config, "workerinput"):  # the controller prints the shard line; it collects nothing itself
        config.workeroutput["privleak_shard"] = {"kept": len(plan.keep), "groups": plan.groups,
                                                 "shard_groups": plan.shard_groups}
    dropped = [item for item in items if item.nodeid not in plan.keep]
    if dropped:
        items[:] = [item for item in items if item.nodeid in plan.keep]
        config.hook.pytest_deselected(items=dropped)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    """xdist: the controller learns the split from the first worker that computed it."""
    settings = node.config.stash.get(SHARD_KEY, None)
    counts = (getattr(node, "workeroutput", None) or {}).get("privleak_shard")
    if settings is not None and counts and not settings.get("counts"):
        settings["counts"] = counts


def _counts(config: pytest.Config) -> dict | None:
    settings = config.stash.get(SHARD_KEY, None)
    if settings is None:
        return None
    plan = settings.get("plan")
    if plan is not None:
        return {"kept": len(plan.keep), "groups": plan.groups, "shard_groups": plan.shard_groups}
    return settings.get("counts")


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_sessionfinish(session: pytest.Session):
    """An empty shard (more shards than groups) exits 0 with a line saying so, not pytest's silent 5."""
    settings = session.config.stash.get(SHARD_KEY, None)
    if settings is not None and session.exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
        counts = _counts(session.config)
        if counts is None or counts["groups"] > 0:  # the run had tests, this shard got none of them
            session.exitstatus = pytest.ExitCode.OK
            settings["empty"] = True
    return (yield)


def pytest_report_header(config: pytest.Config) -> str | None:
    """pytest, in the header: say which shard runs and how the shards were weighed."""
    settings = config.stash.get(SHARD_KEY, None)
    if settings is None:
        return None
    how = "durations from " + str(config.getoption("privleak_shard_durations")) if settings["digest"] else \
        "one unit per test"
    return f"privleak shard {settings['shard']} (groups: xdist_group marker, else module; weights: {how})"


def pytest_terminal_summary(terminalreporter) -> None:
    """pytest, at the end: say how many groups and tests this shard ran, or that it got none."""
    config = terminalreporter.config
    settings = config.stash.get(SHARD_KEY, None)
    if settings is None:
        return
    counts = _counts(config)
    shard = settings["shard"]
    if settings.get("empty"):
        groups = f"the run's {counts['groups']} group(s)" if counts else "the run's groups"
        terminalreporter.write_line(
            f"privleak shard {shard} is empty: {groups} (xdist_group markers, else modules) all went to other "
            f"shards; it exits 0 and its report (if any) holds no tests. The merge of all {shard.count} shards "
            "gates the run; use fewer shards, or split a module with xdist_group markers", yellow=True, bold=True)
    elif counts:
        terminalreporter.write_line(f"privleak shard {shard}: {counts['kept']} test(s) in {counts['shard_groups']} "
                                    f"of {counts['groups']} group(s)")


# --- pytest --privleak-merge-reports DIR... ----------------------------------------------


def pytest_cmdline_main(config: pytest.Config) -> int | None:
    """pytest, instead of a run: with ``--privleak-merge-reports``, merge the shard reports and gate them."""
    from .settings import MERGE_OPTION, given_by_workflow

    folders = config.getoption("privleak_merge_reports")
    if not folders:
        return None
    if not given_by_workflow(config, MERGE_OPTION):
        # the checkout under test would replace its own run with reports it committed (issue 36 item 4)
        raise pytest.UsageError(f"{MERGE_OPTION} {' '.join(map(str, folders))} comes from the ini's addopts (or "
                                "a PYTEST_ADDOPTS set after start-up), not from the workflow's command line: the "
                                "checkout under test must not replace its test run with reports of its own; pass "
                                f"{MERGE_OPTION} on the command line of the merge job")
    return int(_merge_main(config, [str(f) for f in folders]))


class _Section:
    """The two TerminalReporter methods ``ResultCollector.pytest_terminal_summary`` uses, on a plain writer."""

    def __init__(self, writer) -> None:
        self._tw = writer

    def section(self, title: str) -> None:
        self._tw.sep("=", title)

    def write_line(self, line: str, **markup) -> None:
        self._tw.line(line, **markup)


def _merge_main(config: pytest.Config, folders: list[str]) -> pytest.ExitCode:
    from _pytest.config import create_terminal_writer

    from .collector import ResultCollector, TestRecord
    from ..report.merge import MergeError, load_shard, merge_reports
    from ..report.model import ReportFileError, decode_result
    from .settings import read_settings

    try:
        settings = read_settings(config)
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    if config.getoption("privleak_shard"):
        raise pytest.UsageError("--privleak-shard and --privleak-merge-reports do not go together: the merge "
                                "collects nothing; run the shards first, then merge their report folders")
    writer = create_terminal_writer(config, sys.stdout)
    baseline = None
    try:
        if settings.baseline is not None:
            from ..report.baseline_file import load_baseline

            baseline = load_baseline(settings.baseline, unsigned_ok=settings.unsigned_ok)
        merged = merge_reports([(folder, load_shard(folder)) for folder in folders])
    except (MergeError, ReportFileError) as exc:
        written = _refusal(settings, str(exc))
        raise pytest.UsageError(str(exc) + (f" (also written to {written})" if written else "")) from None
    collector = ResultCollector(config, settings, baseline)
    for test in merged["tests"]:
        collector.tests[test["nodeid"]] = TestRecord(
            test["nodeid"], test["outcome"], test["duration"], test["worker"], test["device"], test["seed"],
            [decode_result(r) for r in test["results"]])
    status = collector.finish(merged)
    origin = ", ".join(f"{m['folder']} ({m['tests']} tests" + (f", shard {m['shard']})" if m["shard"] else ")")
                       for m in merged["run"]["merged_from"])
    writer.line(f"privleak merged {len(merged['tests'])} test(s) from {len(folders)} report(s): {origin}")
    collector.pytest_terminal_summary(_Section(writer))
    if status is None and not merged["tests"] and baseline is None:
        writer.line("privleak merge: the shard reports hold no tests; did the shards select any?", red=True,
                    bold=True)
        status = pytest.ExitCode.NO_TESTS_COLLECTED
    return pytest.ExitCode.OK if status is None else status


def _refusal(settings, error: str):
    """When the merge is refused: a report with no tests whose gate part says why (for CI's job summary)."""
    from ..report.gate import failed_comparison
    from ..report.model import build_report, encode
    from ..report.writer import write_report

    if settings.report_dir is None:
        return None
    report = build_report([], [], seed=settings.seed, xdist=False)
    report["baseline"] = encode(failed_comparison("--privleak-merge-reports", error))
    try:
        return write_report(report, settings.report_dir)["markdown"]
    except OSError:
        return None
