"""Device choice: the ``--privleak-device`` option and the xdist worker -> GPU mapping.

Worker ``gwK`` gets GPU ``K mod count`` (or the K-th entry of an explicit
device list), so ``pytest -n <gpus>`` puts one worker on each GPU. With workers
on several hosts (``--tx ssh=...``) K is the worker's index on its own host,
which the controller puts in its ``workerinput`` (:mod:`.placement`); the gw
number is the fallback. Parsing and mapping are pure functions; only
:func:`cuda_device_count` touches torch.

How a worker is pinned (decided here, documented in the README): when the
worker starts (``pytest_configure``) and torch has not been imported yet, the
worker narrows ``CUDA_VISIBLE_DEVICES`` to its one GPU, so CUDA, whenever it
initialises, sees only that GPU and nothing (not even a stray ``.cuda()``)
lands on another worker's GPU; inside the worker that GPU is ``cuda:0``. When
torch was already imported (a conftest imported it), the environment can no
longer be trusted to take effect, so the worker keeps every GPU visible and
uses the explicit device ``cuda:K`` (and ``torch.cuda.set_device``) instead.
An explicit ``--privleak-devices`` list is never rewritten into the
environment: its entries are used as given.
"""
from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping, MutableMapping
from pathlib import Path
from typing import Union

from .placement import LOCAL_INDEX_KEY

#: How callers name a worker: its ``workerinput`` (preferred: it carries the per-host index), its id
#: ``"gwK"``, an index, or ``None`` outside xdist.
Worker = Union[Mapping, str, int, None]

ACCEPTED = "auto, cpu, cuda or cuda:N (N a GPU index)"
_DEVICE_RE = re.compile(r"^(auto|cpu|cuda|cuda:\d+)$")


def parse_device(value: str, *, option: str = "--privleak-device") -> str:
    """Validate a device string, raising ``ValueError`` naming the option and the accepted values."""
    text = str(value).strip().lower()
    if not _DEVICE_RE.match(text):
        raise ValueError(f"{option}={value!r} is not a device; use {ACCEPTED}")
    return text


def parse_device_list(value: str, *, option: str = "--privleak-devices") -> list[str]:
    """Parse a comma-separated list such as ``cuda:0,cuda:2``."""
    items = [item for item in (part.strip() for part in str(value).split(",")) if item]
    if not items:
        raise ValueError(f"{option}={value!r} is empty; give a comma-separated list like cuda:0,cuda:1")
    return [parse_device(item, option=option) for item in items]


def worker_index(worker_id: str | None) -> int | None:
    """``'gw3' -> 3``; ``None`` or ``'master'`` (no xdist) -> ``None``."""
    if worker_id and worker_id.startswith("gw") and worker_id[2:].isdigit():
        return int(worker_id[2:])
    return None


def worker_slot(worker: Worker) -> int | None:
    """The worker's index on its own host: ``workerinput[LOCAL_INDEX_KEY]`` when the controller placed it
    (``--tx``, ``-n N``), else the gw number; ``None`` outside xdist."""
    if isinstance(worker, Mapping):
        local = worker.get(LOCAL_INDEX_KEY)
        if isinstance(local, int) and not isinstance(local, bool) and local >= 0:
            return local
        return worker_index(worker.get("workerid"))
    if isinstance(worker, int) and not isinstance(worker, bool):
        return worker if worker >= 0 else None
    return worker_index(worker)


def choose_device(requested: str, worker: Worker, cuda_count: int,
                  devices: list[str] | None = None) -> str:
    """Map a request and an xdist worker (see :func:`worker_slot`) to a concrete device string (pure;
    testable with a fake count)."""
    index = worker_slot(worker) or 0
    if devices:
        return devices[index % len(devices)]
    if requested == "cpu":
        return "cpu"
    if requested.startswith("cuda:"):
        gpu = int(requested.split(":", 1)[1])
        if gpu >= cuda_count:
            raise ValueError(f"--privleak-device={requested} but only {cuda_count} CUDA device(s) are "
                             "visible; use a smaller index, cuda, or auto")
        return requested
    if cuda_count <= 0:
        if requested == "cuda":
            raise ValueError("--privleak-device=cuda but no CUDA device is visible; use auto or cpu")
        return "cpu"
    return f"cuda:{index % cuda_count}"


def cuda_device_count() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def resolve_device(requested: str, worker: Worker, devices: list[str] | None = None) -> str:
    """The device this process should use (``worker``: its ``workerinput``, or its id)."""
    if requested == "cpu" and not devices:
        return "cpu"
    return choose_device(requested, worker, cuda_device_count(), devices)


# --- counting GPUs without initialising CUDA, and pinning a worker to one ----------------------


def _visible_entries(value: str) -> list[str]:
    """Entries of a ``CUDA_VISIBLE_DEVICES`` value, cut at the first invalid one as CUDA does."""
    entries = []
    for part in value.split(","):
        part = part.strip()
        if not part or part.startswith("-"):
            break
        entries.append(part)
    return entries


def gpu_count_without_init(environ: Mapping[str, str] | None = None, dev: str | os.PathLike = "/dev") -> int | None:
    """Number of visible NVIDIA GPUs, found without importing torch or initialising CUDA.

    ``CUDA_VISIBLE_DEVICES`` when set, else the ``/dev/nvidiaN`` device files (0 when ``/dev``
    has none, so ``-n auto`` on a CPU machine never imports torch); ``None`` when ``/dev``
    cannot be read or shows an AMD ROCm device (``/dev/kfd``), then callers fall back to torch.
    """
    environ = os.environ if environ is None else environ
    if "CUDA_VISIBLE_DEVICES" in environ:
        return len(_visible_entries(environ["CUDA_VISIBLE_DEVICES"]))
    try:
        names = [p.name for p in Path(dev).iterdir()]
    except OSError:
        return None
    count = sum(1 for name in names if re.fullmatch(r"nvidia\d+", name))
    if count == 0 and "kfd" in names:  # ROCm GPUs have no nvidiaN files; torch counts them
        return None
    return count


def pin_worker_gpu(environ: MutableMapping[str, str], worker: Worker, count: int | None,
                   torch_imported: bool, devices: list[str] | None = None,
                   requested: str = "auto") -> str | None:
    """Narrow ``CUDA_VISIBLE_DEVICES`` to the worker's GPU (``K mod count``, K its index on its host,
    see :func:`worker_slot`); return the physical id.

    Does nothing (returns ``None``) outside xdist, with an explicit device list, with a
    CPU or fixed-GPU request, with fewer than two GPUs, or once torch is imported (see the
    module docstring for why).
    """
    index = worker_slot(worker)
    if index is None or devices or requested not in ("auto", "cuda") or torch_imported:
        return None
    if not count or count < 2:
        return None
    visible = _visible_entries(environ.get("CUDA_VISIBLE_DEVICES", ",".join(map(str, range(count)))))
    if len(visible) < 2:
        return None
    chosen = visible[index % len(visible)]
    environ["CUDA_VISIBLE_DEVICES"] = chosen
    environ["PRIVLEAK_PINNED_GPU"] = chosen
    return chosen


def pin_this_worker(worker: Worker, devices: list[str] | None, requested: str) -> str | None:
    """:func:`pin_worker_gpu` applied to this process (called on an xdist worker with its ``workerinput``)."""
    return pin_worker_gpu(os.environ, worker, gpu_count_without_init(), "torch" in sys.modules,
                          devices, requested)


def auto_num_workers(devices: list[str] | None, requested: str, count: int | None) -> int | None:
    """Workers for ``-n auto``: one per GPU (or per listed device); ``None`` lets xdist decide (CPUs)."""
    if devices:
        return len(devices)
    if requested == "cpu" or not count:
        return None
    return count


def controller_gpu_count() -> int:
    """GPU count for the controller: the environment first, then torch (NVML based, no CUDA context)."""
    count = gpu_count_without_init()
    if count is not None:
        return count
    try:
        return cuda_device_count()
    except ImportError:  # pragma: no cover - torch is a dependency
        return 0


def select_torch_device(device: str) -> None:
    """Make ``device`` torch's current CUDA device so bare ``"cuda"`` allocations land on it too."""
    if device.startswith("cuda:"):
        import torch

        torch.cuda.set_device(int(device.split(":", 1)[1]))


#: ``workerinput`` key: how many xdist workers run on this worker's host (set by the controller).
HOST_WORKERS_KEY = "privleak_host_workers"


def worker_cpu_threads(cpu_count: int | None, host_workers: int | None) -> int:
    """CPU threads for one xdist worker: the host's cores shared out among its workers (at least one).

    Measured (issue 11 item 6): two workers of ``-n 2`` on 2 cores, each
    with torch's default of 2 threads, ran the exhaustive CEA of a pin in
    8.2-8.5 s each instead of 1.8 s alone (the threads of one worker wait on
    the other's); with one thread each, 4.4 s.
    """
    return max(1, (cpu_count or 1) // max(1, host_workers or 1))


def share_cpu_threads(environ, host_workers: int | None, torch_loaded: bool, cpu_count: int | None) -> int | None:
    """Limit this xdist worker's torch/OpenMP threads to its share of the host's cores; ``None`` when the user
    already chose (``OMP_NUM_THREADS`` set). Sets ``OMP_NUM_THREADS`` before torch is imported, else
    ``torch.set_num_threads``."""
    if environ.get("OMP_NUM_THREADS"):
        return None
    threads = worker_cpu_threads(cpu_count, host_workers)
    environ["OMP_NUM_THREADS"] = str(threads)
    if torch_loaded:
        import torch

        torch.set_num_threads(threads)
    return threads
