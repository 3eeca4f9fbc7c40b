"""Device choice: the ``--privleak-device`` option and the xdist worker -> GPU mapping.

Worker ``gwK`` gets GPU ``K mod count`` (or the K-th entry of an explicit
device list), so ``pytest -n <gpus>`` puts one worker on each GPU. Parsing and
mapping are pure functions; only :func:`cuda_device_count` touches torch.
"""
from __future__ import annotations

import re

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


def choose_device(requested: str, worker_id: str | None, cuda_count: int,
                  devices: list[str] | None = None) -> str:
    """Map a request and an xdist worker to a concrete device string (pure; testable with a fake count)."""
    index = worker_index(worker_id) or 0
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


def resolve_device(requested: str, worker_id: str | None, devices: list[str] | None = None) -> str:
    """The device this process should use."""
    if requested == "cpu" and not devices:
        return "cpu"
    return choose_device(requested, worker_id, cuda_device_count(), devices)
