"""--privleak-shard=I/N: every test on exactly one shard, groups (xdist_group, else module) never split."""
import json
import random

import pytest

from pytest_privleak.distribute.sharding import Shard, assign_groups, estimated_costs, group_of, parse_shard, split

from helpers_shard import MODULES, make_project, read_report



# --------------------------------------------------------------------------- the split, by hand

def test_parse_shard():
    assert parse_shard("2/3") == Shard(2, 3) and parse_shard(" 1/1 ") == Shard(1, 1)
    assert str(Shard(2, 3)) == "2/3"


def test_groups_are_the_xdist_group_else_the_module():
    assert group_of("tests/test_a.py::test_x[1]") == "module:tests/test_a.py"
    assert group_of("tests/test_a.py::TestC::test_x", ["big"]) == "xdist_group:big"
    assert group_of("t.py::t", ["b", "a", "b"]) == "xdist_group:a_b"      # xdist joins several names sorted


def test_the_automatic_groups_of_xdist_workers_do_not_change_the_split():
    """plugin_speed marks tests on xdist workers only; a shard must split alike with -n 0 and -n N."""
    from types import SimpleNamespace

    from pytest_privleak.plugin.speed import GROUP_PREFIX
    from pytest_privleak.distribute.sharding import xdist_group_names

    marks = [pytest.mark.xdist_group(GROUP_PREFIX + "t.py::pin_data").mark, pytest.mark.xdist_group(name="ours").mark]
    item = SimpleNamespace(iter_markers=lambda name: iter(marks if name == "xdist_group" else []))
    assert xdist_group_names(item) == ["ours"]
    marks.pop()
    assert xdist_group_names(item) == []


def test_greedy_largest_first_to_the_least_loaded_shard():
    """By hand: sizes 4,3,3,2,2 on 3 shards -> 4 | 3+2 | 3+2 (ties go to the shard with fewer tests, then the lower)."""
    groups = {"a": ["a1", "a2", "a3", "a4"], "b": ["b1", "b2", "b3"], "c": ["c1", "c2", "c3"], "d": ["d1", "d2"],
              "g": ["g1", "g2"]}
    weights = estimated_costs([n for ids in groups.values() for n in ids], None)
    assert set(weights.values()) == {1.0}
    assert assign_groups(groups, 3, weights) == [["a"], ["b", "d"], ["c", "g"]]
    # with durations, a heavy group is alone and the light ones fill the other shards
    weights = {**weights, "d1": 10.0, "d2": 10.0}
    assert assign_groups(groups, 3, weights) == [["d"], ["a", "g"], ["b", "c"]]


def test_durations_weigh_tests_and_unknown_tests_cost_the_mean():
    durations = {"t.py::a": 1.0, "t.py::b": 3.0, "t.py::c": 5.0}
    weights = estimated_costs(["t.py::a", "t.py::b", "t.py::c@grp"], durations)
    assert weights == {"t.py::a": 1.0, "t.py::b": 3.0, "t.py::c@grp": 5.0}   # xdist loadgroup's @suffix
    # t.py::new is unknown: it costs the mean of the known tests collected (only t.py::a here)
    assert estimated_costs(["t.py::a", "t.py::new"], durations) == {"t.py::a": 1.0, "t.py::new": 1.0}
    assert estimated_costs(["t.py::a", "t.py::b", "t.py::new"], durations)["t.py::new"] == 2.0


def test_the_split_covers_every_test_once_keeps_groups_and_ignores_input_order():
    rng = random.Random(0)
    tests = {f"m{rng.randrange(12)}.py::t{i}": "" for i in range(200)}
    tests = {n: group_of(n, ["x"] if rng.random() < 0.1 else []) for n in tests}
    durations = {n: rng.random() * 10 for n in tests if rng.random() < 0.7}
    for count in (1, 2, 3, 7, 40):
        shards = [split(tests, Shard(i, count), durations) for i in range(1, count + 1)]
        kept = [s.keep for s in shards]
        assert sum(len(k) for k in kept) == len(tests) and set().union(*kept) == set(tests)
        for nodeid in tests:   # the whole group of each test is on its shard
            [home] = [k for k in kept if nodeid in k]
            assert {n for n in tests if tests[n] == tests[nodeid]} <= home
        shuffled = dict(rng.sample(sorted(tests.items()), len(tests)))
        assert [split(shuffled, Shard(i, count), durations).keep for i in range(1, count + 1)] == kept


def test_the_split_balances_by_durations():
    tests = {f"m{g}.py::t{i}": f"module:m{g}.py" for g in range(6) for i in range(g + 1)}
    durations = {n: 1.0 for n in tests}
    loads = [split(tests, Shard(i, 3), durations).estimate for i in (1, 2, 3)]
    assert sorted(loads) == [7.0, 7.0, 7.0]                            # 6|5+1|4+3+... : 21 tests in 3 x 7


# --------------------------------------------------------------------------- the plugin

def _ids_in(result) -> set[str]:
    return {line.split(" ", 1)[1] for line in result.outlines if line.startswith("PASSED ")}


def test_three_shards_run_every_test_exactly_once_and_keep_groups(pytester):
    all_ids = make_project(pytester.path)
    seen = []
    for i in (1, 2, 3):
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rA", f"--privleak-shard={i}/3",
                                               f"--privleak-report=r{i}")
        assert result.ret == 0, result.stdout.str()
        ids = _ids_in(result)
        result.stdout.fnmatch_lines([f"*{len(ids)} passed, {len(all_ids) - len(ids)} deselected*"])
        assert {t["nodeid"] for t in read_report(pytester.path / f"r{i}")["tests"]} == ids
        assert read_report(pytester.path / f"r{i}")["run"]["shard"] == {"index": i, "count": 3, "durations": None}
        seen.append(ids)
    assert sorted(n for ids in seen for n in ids) == all_ids
    # hand-derived from the sizes alpha 4, beta 3, gamma 3, delta 2, shared-target 2 (see helpers_shard)
    assert {n.split("::")[0] for n in seen[0]} == {"test_alpha.py"}
    assert {n.split("::")[0] for n in seen[1]} == {"test_beta.py", "test_delta.py"}
    assert {n.split("::")[0] for n in seen[2]} == {"test_gamma.py", "test_group_one.py", "test_group_two.py"}
    assert sum(MODULES.values()) + 2 == len(all_ids)


def test_xdist_workers_of_a_shard_agree_on_its_split(pytester):
    make_project(pytester.path)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2", "-rA", "--privleak-shard=3/3",
                                           "--privleak-report=r")
    assert result.ret == 0, result.stdout.str()
    assert {t["nodeid"].split("::")[0] for t in read_report(pytester.path / "r")["tests"]} == {
        "test_gamma.py", "test_group_one.py", "test_group_two.py"}
    result.stdout.fnmatch_lines(["*privleak shard 3/3: 5 test(s) in 2 of 5 group(s)*"])


def test_durations_from_a_previous_report_change_the_split(pytester):
    from pytest_privleak.report.model import build_report, make_test_entry

    ids = make_project(pytester.path)
    report = build_report([make_test_entry(n, "passed", 50.0 if "delta" in n else 1.0, None, None, 0, [])
                           for n in ids], [], seed=0, xdist=False)
    (pytester.path / "old.json").write_text(json.dumps(report), encoding="utf-8")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rA", "--privleak-shard=1/3",
                                           "--privleak-shard-durations=old.json", "--privleak-report=r")
    assert result.ret == 0, result.stdout.str()
    assert {n.split("::")[0] for n in _ids_in(result)} == {"test_delta.py"}   # 100 s alone on shard 1
    assert read_report(pytester.path / "r")["run"]["shard"]["durations"]         # the file's digest


def test_an_empty_shard_exits_0_and_says_why(pytester):
    make_project(pytester.path)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--privleak-shard=6/6", "--privleak-report=r")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*privleak shard 6/6 is empty: the run's 5 group(s)*use fewer shards*",
                                 "*14 deselected*"])
    assert read_report(pytester.path / "r")["tests"] == []


def test_a_run_that_collects_nothing_still_exits_5(pytester):
    pytester.makepyfile(test_nothing="x = 1\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--privleak-shard=1/2")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
