"""One check shared by every attack: scores, losses and probabilities must be finite.

A NaN loss makes a gradient attack guess "0 0 0 0", a NaN probability makes an
exposure 0 bits: both would pass a privacy gate silently. Every attack calls
:func:`require_finite` on what a model or mechanism returned before it turns
it into a figure, so a broken model fails loudly instead.
"""
from __future__ import annotations

import math
from typing import Any


class NonFiniteError(ValueError):
    """A model, scorer or mechanism returned NaN or infinite values where a figure needs finite ones."""


def _count_bad(values: Any) -> tuple[int, int]:
    """``(non-finite count, total count)`` for a float, a numpy array or a torch tensor."""
    if isinstance(values, (int, float)) and not isinstance(values, bool):
        return (0 if math.isfinite(values) else 1), 1
    module = type(values).__module__
    if module.startswith("torch"):
        import torch

        bad = int((~torch.isfinite(values.detach())).sum().item()) if values.is_floating_point() else 0
        return bad, int(values.numel())
    import numpy as np

    arr = np.asarray(values)
    if arr.dtype.kind not in "fc":
        if arr.dtype.kind == "O":
            arr = arr.astype(float)
        else:
            return 0, int(arr.size)
    return int((~np.isfinite(arr)).sum()), int(arr.size)


def require_finite(values: Any, *, what: str, fix: str) -> None:
    """Raise :class:`NonFiniteError` naming ``what`` and ``fix`` when ``values`` holds NaN or ±inf.

    ``what`` says where the values came from ("the model's loss on the canary
    rows"), ``fix`` what the user should do ("check the model's weights for
    NaN; retrain it").
    """
    bad, total = _count_bad(values)
    if bad:
        raise NonFiniteError(f"{what}: {bad} of {total} value(s) are NaN or infinite, so no privacy figure "
                             f"can be computed from them (a gate must not pass on a broken model). Fix: {fix}")
