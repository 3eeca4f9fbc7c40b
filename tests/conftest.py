"""Fixtures shared by the plugin's own tests."""
import os

import pytest

# The plugin's own tests (and the pytester runs they start) train one seed per target unless a test asks for
# more: seven seeds (the product default, issue 26) would make each test train its target seven times.
os.environ.setdefault("PRIVLEAK_SEEDS", "1")


@pytest.fixture
def one_torch_thread():
    """One torch thread for the test: small models are overhead-bound, and two threads on a shared CPU spin."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(autouse=True)
def no_result_cache_unless_a_test_opts_in():
    """The plugin caches attack results under the rootdir's .privleak-cache; the plugin's own tests must compute
    every figure (a result loaded from an earlier run would hide a regression). Tests of the result cache
    activate their own cache inside the test."""
    from pytest_privleak.cache import results as result_cache

    previous = result_cache.activate(None)
    yield
    result_cache.activate(previous)
