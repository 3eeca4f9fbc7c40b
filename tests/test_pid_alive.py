"""pid_alive: a worker that crashed but was not yet reaped (a zombie) is not alive.

Found on the GPU check's first run: an xdist worker killed mid-test stays a zombie until the controller
reaps it, and the job board's helpers waited for it to finish its tests, forever (the controller in turn
waited for them)."""
import os
import subprocess
import sys
import time

import pytest

from pytest_privleak.atomic import pid_alive


def test_a_live_process_is_alive_and_a_made_up_pid_is_not():
    assert pid_alive(os.getpid())
    assert not pid_alive(0) and not pid_alive(-5)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="zombies are read from /proc")
def test_an_exited_child_not_yet_reaped_is_not_alive():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        deadline = time.monotonic() + 30
        while pid_alive(child.pid) and time.monotonic() < deadline:   # not reaped: no wait() until after
            time.sleep(0.05)
        assert not pid_alive(child.pid)
        assert child.poll() == 0                                       # it was a zombie until now
    finally:
        child.wait(timeout=30)
