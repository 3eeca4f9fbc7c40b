"""Bad input to the progress display (issue 11 item 7): each error names the setting or value and the fix."""
import pytest

from pytest_privleak.progress import events as progress
from pytest_privleak.progress.events import Event


def test_an_unknown_event_kind_is_refused_naming_the_known_ones():
    with pytest.raises(ValueError, match=r"progress event kind 'epochs' is not one of \[.*'epoch'.*\]"):
        progress.emit("epochs", "t")


@pytest.mark.parametrize("data", [{"kind": "nonsense"}, ["epoch"], {"target": "t"}])
def test_a_line_that_is_not_an_event_is_refused_showing_it(data):
    with pytest.raises(ValueError, match=r"not a progress event: "):
        Event.from_json(data)


def test_a_bad_ini_mode_is_a_usage_error_naming_the_ini_option_and_the_fix(pytester):
    pytester.makeini("[pytest]\nprivleak_progress = loud\n")
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*ini option privleak_progress='loud' is not one of auto, live, lines, off; "
                                 "fix: privleak_progress = auto (or live, lines, off)*"])


def test_a_bad_command_line_mode_names_the_choices(pytester):
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--privleak-progress=loud")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--privleak-progress: invalid choice: 'loud' (choose from*auto*live*lines*off*"])
