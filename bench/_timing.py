"""Wall-clock timing shared by the benches: the device is synchronised before and after, so GPU work counts."""
from __future__ import annotations

import time

import torch


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def timed(device: str, fn) -> float:
    """Seconds ``fn()`` takes on ``device``."""
    _sync(device)
    began = time.perf_counter()
    fn()
    _sync(device)
    return time.perf_counter() - began
