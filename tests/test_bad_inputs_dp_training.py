"""Bad inputs to the DP audit's training (review session 6): ``sources=`` and misuse of ``audit_hook`` get a
clear error naming the argument and the fix."""
from __future__ import annotations

import pytest

pytest.importorskip("opacus")

import dp_pipelines as P  # noqa: E402
from pytest_privleak.dp.audit import measure_dp_training  # noqa: E402
from pytest_privleak.data.synthetic import generate_snips_like  # noqa: E402

CONFIG = {"epsilon": 2.0, "delta": 1e-5, "bug": "none"}


@pytest.fixture(scope="module")
def data():
    return generate_snips_like(n_train=120, n_valid=0, n_test=0)


def _measure(data, train=P.train, **kwargs):
    kwargs = {"build": P.build, "method": "one-run", "threat_model": "white-box", "config": CONFIG,
              "canaries": 50, "check_seed": False, **kwargs}
    return measure_dp_training(train, data, 2.0, 1e-5, **kwargs)


def test_sources_naming_a_missing_file(data, tmp_path):
    with pytest.raises(FileNotFoundError, match=r"sources\[1\]=.*nowhere.py' is not a file; fix: list the .py"):
        _measure(data, sources=[P.__file__, tmp_path / "nowhere.py"])


@pytest.mark.parametrize("sources, message", [
    ([3], r"sources\[0\] is a int, not a file path or module; fix"),
    (7, "sources must be a list of file paths or modules, got int; fix"),
])
def test_sources_of_the_wrong_type(data, sources, message):
    with pytest.raises(TypeError, match=message):
        _measure(data, sources=sources)


def test_sources_naming_a_module_without_a_file(data):
    import sys

    with pytest.raises(TypeError, match=r"sources\[0\]: module 'sys' has no source file; fix"):
        _measure(data, sources=[sys])


def test_hook_called_twice_is_refused(data):
    with pytest.raises(ValueError, match=r"called audit_hook 2 times in one training.*fix: call audit_hook"):
        _measure(data, train=P.train_calling_hook_twice)


def test_allow_inconclusive_must_be_a_bool(data):
    # old: allow_inconclusive="no" was recorded as accepted
    with pytest.raises(ValueError, match=r"allow_inconclusive must be True or False, got 'no'"):
        _measure(data, allow_inconclusive="no")
