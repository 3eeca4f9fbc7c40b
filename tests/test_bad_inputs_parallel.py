"""Bad inputs of the parallel training of own models (issue 35 item 2): each names the option and the fix."""
import pytest


@pytest.mark.parametrize("value", ["0", "-2", "two", "1.5"])
def test_train_processes_must_be_auto_or_an_integer_of_at_least_one(value):
    from pytest_privleak.plugin.parallel import parse_train_processes

    with pytest.raises(ValueError, match=rf"--privleak-train-processes={value!r} is not a number of processes; "
                                         r"give auto \(the cores this process may use, an xdist worker its share\), or an "
                                         r"integer >= 1 \(1: an own model's seeds train one after another\)"):
        parse_train_processes(value)
    assert parse_train_processes("auto") is None and parse_train_processes(" 3 ") == 3


def test_a_bad_train_processes_is_a_usage_error_naming_the_option_or_the_ini(pytester):
    pytester.makepyfile("def test_nothing():\n    pass\n")
    result = pytester.runpytest_subprocess("--privleak-train-processes=0")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--privleak-train-processes='0' is not a number of processes; give auto*"])
    pytester.makeini("[pytest]\nprivleak_train_processes = many\n")
    result = pytester.runpytest_subprocess()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*ini privleak_train_processes='many' is not a number of processes*"])
