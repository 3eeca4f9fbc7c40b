"""Progress events of long work (target training, cache waits, LDP audits), and where they go.

Code that works for a while calls :func:`emit` with a small structured event:
which target, epoch x of y, the ETA, and at the end where the target came
from (``"trained"`` or ``"loaded from cache"``). Who shows it is decided once
per process by :func:`set_sink`:

* no sink (library use outside pytest): an event that carries a ``line`` is
  printed on stderr, exactly the lines printed before this module existed
  (one per epoch, the lock "waiting" lines, the LDP audit lines); the other
  events (start, done, loaded from cache) print nothing;
* the pytest plugin (:mod:`pytest_privleak.plugin.progress`) installs a sink
  that shows live progress through pytest's terminal writer, which pytest's
  output capture would otherwise hide until the test ends.

No torch and no pytest here: importing this module costs nothing.
"""
from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import logging
import socket
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Event", "emit", "set_sink", "get_sink", "target", "current_target", "part", "current_part",
           "set_current_test",
           "START", "EPOCH", "DONE", "WAIT", "NOTE", "AUDIT", "AUDIT_DONE",
           "TRAINED", "LOADED", "FAILED"]

logger = logging.getLogger("pytest_privleak.progress")

#: Event kinds. A *task* (a target being trained, an audit) opens with START or its
#: first EPOCH/AUDIT event and closes with DONE or AUDIT_DONE.
START, EPOCH, DONE, WAIT, NOTE, AUDIT, AUDIT_DONE = "start", "epoch", "done", "wait", "note", "audit", "audit-done"
KINDS = frozenset({START, EPOCH, DONE, WAIT, NOTE, AUDIT, AUDIT_DONE})
#: ``source`` of a DONE event: where the target came from.
TRAINED, LOADED, FAILED = "trained", "loaded from cache", "failed"


@dataclass
class Event:
    """One progress event; JSON-safe, so an xdist worker can hand it to the controller.

    ``target``: what the event is about (``"joint-bilstm-crf 3fa9c2e1"``, ``"ldp KRR(k=3, epsilon=1)"``);
    ``done``/``total``: epochs or samples so far and planned; ``eta``/``seconds``: seconds left / taken
    (``eta_at_most``: the ETA is an upper bound, e.g. training with early stopping);
    ``source``: for DONE where the target came from, for WAIT who holds what it waits for;
    ``line``: the plain stderr line of the event (printed when no sink is installed);
    ``worker``/``host``: filled in by the sink of an xdist worker; ``time``: ``time.time()`` at emission;
    ``part``: which one of several the task is (``"seed 3 of 7"``, ``"reference 2 of 4"``, nested parts joined
    by ``", "``), from the :func:`part` blocks around it unless given; ``test``: the node id of the test running
    when it was emitted (set by the plugin, :func:`set_current_test`).
    """

    kind: str
    target: str | None = None
    done: float | None = None
    total: float | None = None
    eta: float | None = None
    eta_at_most: bool | None = None
    seconds: float | None = None
    source: str | None = None
    unit: str = "epoch"
    phase: str | None = None
    line: str | None = None
    worker: str | None = None
    host: str | None = None
    part: str | None = None
    test: str | None = None
    time: float = field(default_factory=time.time)

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Event":
        """The event in ``data`` (unknown keys ignored); ``ValueError`` when it is not an event."""
        if not isinstance(data, dict) or data.get("kind") not in KINDS:
            raise ValueError(f"not a progress event: {data!r}")
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


Sink = Callable[[Event], None]
_sink: Sink | None = None
_current: contextvars.ContextVar[str | None] = contextvars.ContextVar("privleak_progress_target", default=None)
_part: contextvars.ContextVar[str | None] = contextvars.ContextVar("privleak_progress_part", default=None)
_test: str | None = None


def set_sink(sink: Sink | None) -> Sink | None:
    """Send every event of this process to ``sink`` (None: back to plain stderr lines); returns the previous."""
    global _sink
    previous, _sink = _sink, sink
    return previous


def get_sink() -> Sink | None:
    return _sink


@contextlib.contextmanager
def target(label: str) -> Iterator[None]:
    """Events emitted in the block without a ``target`` are about ``label`` (e.g. a cache lock wait)."""
    token = _current.set(label)
    try:
        yield
    finally:
        _current.reset(token)


def current_target() -> str | None:
    """The label set by the innermost :func:`target` block, or None."""
    return _current.get()


@contextlib.contextmanager
def part(text: str) -> Iterator[None]:
    """Events emitted in the block are about part ``text`` of a larger job (``"seed 3 of 7"``); nested blocks
    join theirs (``"reference 2 of 4, seed 1 of 7"``). A batched loop that trains several parts at once
    passes ``part=`` to :func:`emit` instead."""
    outer = _part.get()
    token = _part.set(text if not outer else f"{outer}, {text}")
    try:
        yield
    finally:
        _part.reset(token)


def current_part() -> str | None:
    """The part set by the enclosing :func:`part` blocks, or None."""
    return _part.get()


def set_current_test(nodeid: str | None) -> None:
    """The test this process runs now (the plugin sets it around each test); events carry it as ``test``."""
    global _test
    _test = nodeid


def emit(kind: str, target: str | None = None, *, line: str | None = None, **fields: Any) -> None:
    """Report progress: ``emit("epoch", "lstm-lm 81ab02cd", done=3, total=30, eta=12.0, line=...)``.

    Never raises because of the display: a sink that fails is logged and the
    plain line printed instead, so progress can never fail a test or a training.
    """
    if kind not in KINDS:
        raise ValueError(f"progress event kind {kind!r} is not one of {sorted(KINDS)}")
    fields.setdefault("part", _part.get())
    fields.setdefault("test", _test)
    event = Event(kind, target if target is not None else _current.get(), line=line, **fields)
    sink = _sink
    if sink is not None:
        try:
            sink(event)
            return
        except Exception:  # noqa: BLE001 - progress display must not break the work it reports on
            logger.exception("progress sink failed; printing the plain line instead")
    print_line(event)


def print_line(event: Event) -> None:
    """The no-sink behaviour: the event's plain line on stderr, if it has one."""
    if event.line:
        print(event.line, file=sys.stderr, flush=True)


def this_host() -> str:
    return socket.gethostname()
