"""Atomic file and directory writes: readers see the old content or the new, never half of it; and whether the
process that wrote a file (a lock, a progress channel) still runs."""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path


def write_text_atomic(path: str | os.PathLike, text: str, encoding: str = "utf-8") -> Path:
    """Write ``text`` to ``path`` through a temporary file in the same folder and ``os.replace``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, _default_file_mode())  # mkstemp makes 0600; a report is shared like any written file
        with os.fdopen(fd, "w", encoding=encoding) as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _default_file_mode() -> int:
    """0666 less this process's umask: the mode ``open(path, "w")`` would give a new file."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def publish_dir_atomic(staging: Path, final: Path) -> Path:
    """Move a fully written ``staging`` folder to ``final`` in one rename (replacing a stale one)."""
    if final.exists():
        shutil.rmtree(final)
    os.rename(staging, final)
    return final


def pid_alive(pid: int) -> bool:
    """Whether a process with this PID runs on this host (a recycled PID reads as alive; an exited one not yet
    reaped, a zombie, does not)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return True
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    """Whether ``pid`` has exited but was not yet reaped (Linux ``/proc``; elsewhere False). A crashed xdist
    worker stays a zombie until its controller reaps it, which can be after the others waited for it."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return False
    return stat[stat.rfind(")") + 2:][:1] in ("Z", "X")
