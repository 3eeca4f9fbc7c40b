"""The public names resolve, stay lazy (no torch at `import pytest_privleak`), and every measure_* has its assert_*."""
import subprocess
import sys

import pytest

import pytest_privleak
from pytest_privleak import assertions


@pytest.mark.parametrize("name", sorted(pytest_privleak.__all__))
def test_every_public_name_resolves(name):
    assert callable(getattr(pytest_privleak, name)) or isinstance(getattr(pytest_privleak, name), type)


@pytest.mark.parametrize("name", sorted(n for n in assertions.__all__ if n != "check"))
def test_every_helper_takes_a_name_label(name):
    import inspect

    parameters = inspect.signature(getattr(assertions, name)).parameters
    assert "name" in parameters, f"{name} has no name= label (result keys must be stable and readable)"


def test_importing_the_package_and_the_plugin_imports_no_torch():
    code = ("import sys, pytest_privleak, pytest_privleak.plugin, pytest_privleak.assertions; "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_unknown_name_says_so():
    with pytest.raises(AttributeError, match="no attribute 'assert_nothing'"):
        pytest_privleak.assert_nothing  # noqa: B018


def test_the_result_recording_functions_are_not_public_api():
    """Issue 36 item 5: figures are recorded by the helpers (with their audit record), not by hand; the plumbing
    stays importable for the plugin but is in neither the package's nor ``results``' public names."""
    from pytest_privleak import results

    plumbing = {"record", "set_sink", "set_recorder", "mark_expected", "open_expect_leak_blocks"}
    assert not plumbing & set(pytest_privleak.__all__)
    assert not plumbing & set(results.__all__)
    assert all(hasattr(results, name) for name in results.__all__)
    assert all("Internal (not API)" in getattr(results, name).__doc__ for name in ("record", "set_sink",
                                                                                 "set_recorder"))
