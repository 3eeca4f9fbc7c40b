"""Own models' seeds and references trained in parallel: ``--privleak-train-processes`` and the xdist job board.

Issue 35 item 2 (:mod:`pytest_privleak.targets.parallel` does the work). A run
without xdist workers trains an own model's missing seeds (and a
``TargetRecipe(train=...)``'s references) over a pool of
``--privleak-train-processes`` processes, by default the cores this process
may use (1: one after another, as before). Under xdist the controller makes a
job board (:mod:`pytest_privleak.distribute.board`) in a temporary folder
and hands its path to the workers on its machine: a worker posts the
trainings it needs, and a worker that has run out of tests helps with them,
on its own device (``--privleak-devices=cuda:0,cuda:0`` puts two on one GPU),
until no other worker runs tests. There a worker's processes default to its
share of its host's cores (1 for ``-n 2`` on 2 cores: the board spreads the
work then; 8 for ``-n 2`` on 16 cores: a pool of 8 trains a CPU model's seeds
without waiting for an idle worker).
"""
from __future__ import annotations

import os
import shutil
import tempfile

import pytest

BOARD_KEY = pytest.StashKey[object]()
_FOLDER_KEY = pytest.StashKey[str]()
#: ``workerinput`` key: the job board's folder on the controller's machine.
BOARD_INPUT_KEY = "privleak_board"
OPTION = "--privleak-train-processes"
INI = "privleak_train_processes"


def parse_train_processes(value: object, *, option: str = OPTION) -> int | None:
    """``"auto"`` or empty -> ``None`` (decided by the run); else an integer >= 1, or ``ValueError`` naming ``option``."""
    text = str(value).strip().lower() if value is not None else ""
    if text in ("", "auto"):
        return None
    try:
        count = int(text)
    except ValueError:
        count = 0
    if count < 1:
        raise ValueError(f"{option}={value!r} is not a number of processes; give auto (the cores this process may "
                         "use, an xdist worker its share), or an integer >= 1 (1: an own model's seeds train one after "
                         "another)")
    return count


def pytest_addoption(parser: pytest.Parser) -> None:
    """pytest, at start-up: register ``--privleak-train-processes`` and its ini default."""
    group = parser.getgroup("privleak", "privacy leakage assertions (pytest-privleak)")
    group.addoption(OPTION, dest="privleak_train_processes", default=None, metavar="N",
                    help="processes that train an own model's seeds (and references) at once, and threads a built-in "
                         "target's seed stack splits into on the CPU: auto (default: the cores this process may "
                         "use; an xdist worker its share of its host's, and idle workers help) or N (1: one after "
                         "another, one stack)")
    parser.addini(INI, f"default for {OPTION} (default auto)", default="")


def _processes(config: pytest.Config) -> int | None:
    option = config.getoption("privleak_train_processes", None)
    if option is not None:
        return parse_train_processes(option)
    return parse_train_processes(config.getini(INI), option=f"ini {INI}")


def pytest_configure(config: pytest.Config) -> None:
    """pytest, at configure: read the process count (a bad value is a usage error); set how this process
    spreads own models' trainings; on an xdist worker, join the job board its controller made."""
    from ..targets import parallel

    try:
        processes = _processes(config)
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    board = None
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        folder = workerinput.get(BOARD_INPUT_KEY)
        if isinstance(folder, str) and os.path.isdir(folder):     # not on another host
            from ..distribute.board import Board

            board = Board(folder, workerinput.get("workerid", f"pid{os.getpid()}"))
            board.running()
            config.stash[BOARD_KEY] = board
    if processes is None:       # auto: this process's cores, a worker its share of its host's
        from ..distribute.device import HOST_WORKERS_KEY, worker_cpu_threads

        processes = parallel.usable_cores() if workerinput is None else worker_cpu_threads(
            parallel.usable_cores(), workerinput.get(HOST_WORKERS_KEY))
    config.stash[_PREVIOUS_KEY] = parallel.configure(processes, board)


_PREVIOUS_KEY = pytest.StashKey[object]()


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """xdist, on the controller: hand each worker the job board's folder (made on the first worker)."""
    config = node.config
    if _FOLDER_KEY not in config.stash:
        config.stash[_FOLDER_KEY] = tempfile.mkdtemp(prefix="privleak-board-")
    node.workerinput[BOARD_INPUT_KEY] = config.stash[_FOLDER_KEY]


def pytest_sessionfinish(session: pytest.Session) -> None:
    """On an xdist worker out of tests: help the others with the trainings they posted, until none runs tests."""
    board = session.config.stash.get(BOARD_KEY, None)
    if board is None:
        return
    board.finished()
    if not board.others_running() and not board.open_jobs():
        return
    from ..targets.parallel import help_others

    help_others(board, device=_device(session.config))


def _device(config: pytest.Config) -> str:
    """This worker's device, as its ``privleak_device`` fixture gives it (resolved here when no test asked)."""
    from . import DEVICE_KEY, SETTINGS_KEY

    device = config.stash.get(DEVICE_KEY, None)
    if device is not None:
        return device
    from ..distribute.device import resolve_device

    settings = config.stash[SETTINGS_KEY]
    try:
        return resolve_device(settings.device, getattr(config, "workerinput", None), list(settings.devices) or None)
    except ValueError:
        return "cpu"


def pytest_unconfigure(config: pytest.Config) -> None:
    """At the very end: end the training processes, restore the spread, remove the board (controller)."""
    from ..targets import parallel

    parallel.shutdown()
    previous = config.stash.get(_PREVIOUS_KEY, None)
    if previous is not None:
        parallel.configure(previous.processes, previous.board)
    folder = config.stash.get(_FOLDER_KEY, None)
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)
