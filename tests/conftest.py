"""Fixtures shared by the plugin's own tests."""
import pytest


@pytest.fixture
def one_torch_thread():
    """One torch thread for the test: small models are overhead-bound, and two threads on a shared CPU spin."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
