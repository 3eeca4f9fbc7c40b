"""``LeakResult``: one measured privacy figure with everything a reader needs to judge it.

Results are recorded on the running test item (so the report and the
baseline gate see them) and turned into the assertion message.
"""
from __future__ import annotations

import math
import threading
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Direction = Literal["at_most", "at_least"]


class PrivacyLeakError(AssertionError):
    """Raised by the ``assert_*`` helpers; carries the failing :class:`LeakResult`."""

    def __init__(self, result: "LeakResult") -> None:
        super().__init__(result.explain())
        self.result = result


def _fmt(x: float | None) -> str:
    if x is None:
        return "n/a"
    if isinstance(x, float) and (math.isinf(x) or math.isnan(x)):
        return str(x)
    ax = abs(x)
    if ax != 0 and (ax < 1e-3 or ax >= 1e5):
        return f"{x:.2e}"
    return f"{x:.4g}" if ax >= 100 else f"{x:.3f}"


@dataclass
class LeakResult:
    """One privacy figure, its uncertainty, what it is compared with, and why.

    ``value`` is the figure compared with ``threshold`` (for a statistical
    verdict that is the bound, e.g. the ε lower bound); ``direction`` says
    whether it must stay at most or at least the threshold.
    """

    attack: str
    metric: str
    value: float
    threshold: float | None = None
    direction: Direction = "at_most"
    interval: tuple[float, float] | None = None
    confidence: float | None = None
    chance: float | None = None
    ceiling: float | None = None
    label: str = ""
    evidence: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, float] = field(default_factory=dict)
    remedy: str = ""
    tolerance: float | None = None
    target: dict[str, Any] = field(default_factory=dict)
    #: The figure of each training seed when measured over several (issue 26); empty for one draw.
    per_seed: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if self.direction not in ("at_most", "at_least"):
            raise ValueError(f"direction must be 'at_most' or 'at_least', got {self.direction!r}")
        self.value = self._figure("value", self.value)
        if math.isnan(self.value):
            raise ValueError(f"{self.attack}/{self.metric}: the measured value is NaN; the model or scorer "
                             "returned non-finite scores, check its outputs")
        if self.threshold is not None:
            self.threshold = self._figure("threshold", self.threshold)
            if math.isnan(self.threshold):
                raise ValueError(f"{self.attack}/{self.metric}: the threshold is NaN, so no value could pass or "
                                 "fail it; give the limit as a number")
        if self.interval is not None:
            self.interval = (float(self.interval[0]), float(self.interval[1]))
        self.per_seed = tuple(self._figure("per_seed", v) for v in self.per_seed)

    def _figure(self, what: str, x: Any) -> float:
        """``x`` as a plain float (numpy scalars and one-element tensors too, so NaN checks and JSON work)."""
        if x is None or isinstance(x, (bool, str, bytes)):
            raise TypeError(f"{self.attack}/{self.metric}: {what} must be a number, got {x!r}")
        try:
            return float(x)
        except (TypeError, ValueError):
            raise TypeError(f"{self.attack}/{self.metric}: {what} must be a number (a float, a numpy scalar or a "
                            f"one-element tensor), got {type(x).__name__}") from None

    @property
    def passed(self) -> bool:
        if self.threshold is None:
            return True
        if self.direction == "at_most":
            return self.value <= self.threshold
        return self.value >= self.threshold

    @property
    def verdict(self) -> str:
        if self.threshold is None:
            return "measured"
        return "pass" if self.passed else "FAIL"

    @property
    def name(self) -> str:
        return f"{self.attack}.{self.metric}"

    def explain(self) -> str:
        """The assertion message: figure, interval, threshold, chance, evidence, remedy."""
        word = "at most" if self.direction == "at_most" else "at least"
        head = f"privleak {self.name}"
        if self.label:
            head += f" [{self.label}]"
        if self.threshold is not None:
            relation = "within" if self.passed else "violates"
            head += f": {_fmt(self.value)} {relation} the limit ({word} {_fmt(self.threshold)})"
        lines = [head]
        fig = f"  figure     : {self.metric} = {_fmt(self.value)}"
        if self.interval is not None:
            conf = f"{self.confidence:.0%} " if self.confidence else ""
            fig += f"  ({conf}CI {_fmt(self.interval[0])} .. {_fmt(self.interval[1])})"
        lines.append(fig)
        if self.threshold is not None:
            lines.append(f"  threshold  : {word} {_fmt(self.threshold)}")
        lines.append(f"  chance     : {_fmt(self.chance)}")
        if self.ceiling is not None:
            lines.append(f"  ceiling    : {_fmt(self.ceiling)} (largest value this measurement can show)")
        for key, val in self.extra.items():
            lines.append(f"  {key:<11}: {_fmt(val)}")
        for key, val in self.evidence.items():
            lines.append(f"  {key:<11}: {val}")
        if self.remedy and not self.passed:
            lines.append(f"  remedy     : {self.remedy}")
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["interval"] = list(self.interval) if self.interval is not None else None
        data["passed"] = self.passed
        data["verdict"] = self.verdict
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "LeakResult":
        fields = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        if fields.get("interval") is not None:
            fields["interval"] = tuple(fields["interval"])
        return cls(**fields)


# --- recording on the running test item -------------------------------------------------
# The plugin sets the sink around each test call; outside pytest results are simply returned.
_local = threading.local()


def set_sink(sink: list | None) -> None:
    """Install the list that ``record`` appends to (the plugin does this per test)."""
    _local.sink = sink


def record(result: LeakResult) -> LeakResult:
    sink = getattr(_local, "sink", None)
    if sink is not None:
        sink.append(result)
    return result
