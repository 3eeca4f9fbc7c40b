"""Bad values of the hosts area's settings: a usage error naming the ini option, the value and the fix.

Before this option existed pytest only warned "Unknown config option" and the
run went on with a two-minute lease, so each case here failed on the old code.
"""
from __future__ import annotations

import pytest

from pytest_privleak.plugin.settings import parse_lease_ttl


@pytest.mark.parametrize("value", ["abc", "0", "-5", "inf", "nan", "2 minutes"])
def test_a_lease_ttl_that_is_not_a_positive_number_of_seconds_is_refused(value):
    with pytest.raises(ValueError, match=rf"ini option privleak_cache_lease_ttl = '{value}' is not a number of "
                                         r"seconds > 0; write e.g. privleak_cache_lease_ttl = 120"):
        parse_lease_ttl(value)


def test_a_bad_lease_ttl_in_the_ini_stops_the_run_before_any_test(pytester):
    pytester.makeini("[pytest]\nprivleak_cache_lease_ttl = -3\n")
    pytester.makepyfile(test_one="def test_one():\n    raise SystemExit('must not run')\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*ini option privleak_cache_lease_ttl = '-3' is not a number of seconds > 0; "
                                 "write e.g. privleak_cache_lease_ttl = 120*"])
