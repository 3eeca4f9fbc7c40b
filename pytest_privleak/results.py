"""``LeakResult``: one measured privacy figure with everything a reader needs to judge it.

Results are recorded on the running test item (so the report and the
baseline gate see them) and turned into the assertion message.
"""
from __future__ import annotations

import math
import re
import threading
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Literal

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


# extras that count things (seeds, references, trials): printed as integers, not "7.000"
_COUNT_EXTRAS = frozenset({"seeds", "worst_seed", "n_references", "k_requested", "successes", "trials",
                           "extracted", "canaries", "items", "canary_count", "pooled_successes", "pooled_trials"})


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
    #: The figure of each canary of a CanarySet (issue 37): one row per training seed (one row for one model),
    #: one figure per canary, in the set's order; ``per_seed`` (and ``value``) are then the means over the rows.
    #: Empty when the figure is of one canary, or of no canary at all.
    per_canary: tuple[tuple[float, ...], ...] = ()
    #: Points of a curve the report draws beside the figure, e.g. membership's ROC as
    #: ``{"fpr": [...], "tpr": [...]}`` (issue 18); empty when there is none.
    curve: dict[str, list[float]] = field(default_factory=dict)

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
        self.per_canary = tuple(tuple(self._figure("per_canary", v) for v in row) for row in self.per_canary)
        if len({len(row) for row in self.per_canary}) > 1:
            raise ValueError(f"{self.attack}/{self.metric}: per_canary rows differ in length "
                             f"({[len(row) for row in self.per_canary]}); every seed measures the same canaries")

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
            shown = f"{int(val)}" if key in _COUNT_EXTRAS and float(val).is_integer() else _fmt(val)
            lines.append(f"  {key:<11}: {shown}")
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
        if fields.get("per_canary"):
            fields["per_canary"] = tuple(tuple(row) for row in fields["per_canary"])
        return cls(**fields)


def target_facts(target: Any) -> dict:
    """JSON-safe facts about a target for ``LeakResult.target`` (``describe()`` when it has one)."""
    describe = getattr(target, "describe", None)
    facts = describe() if callable(describe) else {}
    return {"class": type(target).__name__, **(facts if isinstance(facts, dict) else {})}


# --- recording: every result reaches the plugin, from any thread ----------------------------
# The plugin installs one recorder per process (set_recorder) and attributes each result to the test or
# fixture running when it arrives; outside pytest results are simply returned. set_sink diverts this
# thread's results into a list instead (over_seeds collects its members' results so, and records the
# aggregate); whoever diverts owns them.
_local = threading.local()
_lock = threading.Lock()
_recorder: Callable[[LeakResult], None] | None = None
_expecting = 0   # open expect_leak blocks, in any thread
_EXPECTED_ATTR = "_privleak_expected_leak"


def set_sink(sink: list | None) -> None:
    """Divert this thread's results into ``sink`` instead of the plugin's recorder (``None``: stop diverting)."""
    _local.sink = sink


def set_recorder(recorder: Callable[[LeakResult], None] | None) -> Callable[[LeakResult], None] | None:
    """Install the process-wide callable that receives every recorded result; returns the previous one."""
    global _recorder
    with _lock:
        previous, _recorder = _recorder, recorder
    return previous


def record(result: LeakResult) -> LeakResult:
    """Hand ``result`` to the plugin (or this thread's diverting sink); inside :class:`expect_leak` it is expected."""
    with _lock:
        expecting, recorder = _expecting, _recorder
    if expecting:
        mark_expected(result)
    sink = getattr(_local, "sink", None)
    if sink is not None:
        sink.append(result)
    elif recorder is not None:
        recorder(result)
    return result


def mark_expected(result: LeakResult) -> None:
    """Declare ``result`` an expected leak: shown as such, not counted as a leak, not a swallowed one."""
    setattr(result, _EXPECTED_ATTR, True)


def is_expected(result: LeakResult) -> bool:
    """Whether ``result`` was declared an expected leak (recorded inside :class:`expect_leak`)."""
    return bool(getattr(result, _EXPECTED_ATTR, False))


class expect_leak:
    """``with expect_leak(match=None) as leak:`` -- the block must raise :class:`PrivacyLeakError`.

    Works like ``pytest.raises(PrivacyLeakError, match=...)``: it fails when no
    leak is raised or when ``match`` (a regex, ``re.search``) does not match the
    message, and gives the error as ``leak.value``. Unlike ``pytest.raises``, the
    results recorded inside the block (from any thread) are marked as expected
    leaks, so the report shows them as "expected leak" and the run does not fail
    on a leak the test caught itself (a swallowed leak fails the run).
    """

    def __init__(self, match: str | re.Pattern[str] | None = None) -> None:
        self.match_expr = match
        self.value: PrivacyLeakError | None = None
        self.type: type[PrivacyLeakError] | None = None

    @property
    def result(self) -> LeakResult:
        """The failing result the block raised."""
        if self.value is None:
            raise AttributeError("expect_leak: no leak was raised (yet)")
        return self.value.result

    def match(self, regexp: str | re.Pattern[str]) -> bool:
        """Assert that ``regexp`` matches the leak's message (``re.search``), as ``ExceptionInfo.match``."""
        __tracebackhide__ = True
        text = str(self.value)
        if re.search(regexp, text) is None:
            raise AssertionError(f"expect_leak: the regex {regexp!r} does not match the leak's message:\n{text}")
        return True

    def __enter__(self) -> "expect_leak":
        global _expecting
        with _lock:
            _expecting += 1
        return self

    def __exit__(self, kind, error, traceback) -> bool:
        __tracebackhide__ = True
        global _expecting
        with _lock:
            _expecting -= 1
        if kind is None:
            raise AssertionError("expect_leak: DID NOT RAISE PrivacyLeakError; the block was expected to leak "
                                 "(an assert_* helper over its limit), but every result stayed within it")
        if not issubclass(kind, PrivacyLeakError):
            return False
        mark_expected(error.result)
        self.value, self.type = error, kind
        if self.match_expr is not None:
            self.match(self.match_expr)
        return True


# The result codec: JSON-safe encoding of a result and its figures, shared by the caches, the plugin and
# the report (it sits here, below all of them, so no wing imports upwards for it).
_NONFINITE = {"Infinity": math.inf, "-Infinity": -math.inf, "NaN": math.nan}
#: LeakResult fields that hold figures (numbers or None), decoded back to floats on load.
FIGURE_FIELDS = ("value", "threshold", "confidence", "chance", "ceiling", "tolerance")


def encode(obj: Any) -> Any:
    """Make ``obj`` strict-JSON safe: non-finite floats become strings, tuples lists, others ``str``.

    Subclasses of the builtins (``numpy.float64`` is a ``float``) come back as the plain builtin,
    so the result also crosses xdist's execnet channel, which accepts only exact builtin types.
    """
    if isinstance(obj, float):
        if math.isnan(obj):
            return "NaN"
        if math.isinf(obj):
            return "Infinity" if obj > 0 else "-Infinity"
        return float(obj)
    if obj is None:
        return obj
    if isinstance(obj, bool):
        return bool(obj)
    if isinstance(obj, int):
        return int(obj)
    if isinstance(obj, str):
        return str(obj)
    if isinstance(obj, dict):
        return {str(k): encode(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [encode(v) for v in obj]
    if hasattr(obj, "tolist"):
        return encode(obj.tolist())
    return str(obj)


def figure(value: Any) -> float | None:
    """Decode a figure written by :func:`encode` back to a float (``None`` stays ``None``)."""
    if value is None:
        return None
    if isinstance(value, str):
        return _NONFINITE.get(value, math.nan)
    return float(value)


def decode_result(data: dict[str, Any]) -> dict[str, Any]:
    """A ``LeakResult.to_json`` dict passed through :func:`encode`, with its figures floats again.

    The figure fields, the interval and ``extra`` are decoded (``"Infinity"`` back to ``inf``);
    ``evidence`` and ``target`` stay as encoded (free-form, JSON-safe by contract). The plugin
    encodes every result on the worker and decodes it here, with or without xdist, so
    ``LeakResult.from_json`` sees the same values either way.
    """
    out = dict(data)
    for name in FIGURE_FIELDS:
        if name in out:
            out[name] = figure(out[name])
    if out.get("interval") is not None:
        out["interval"] = [figure(v) for v in out["interval"]]
    if isinstance(out.get("extra"), dict):
        out["extra"] = {k: figure(v) for k, v in out["extra"].items()}
    if isinstance(out.get("per_seed"), list):  # the figure of each training seed (issue 26)
        out["per_seed"] = [figure(v) for v in out["per_seed"]]
    if isinstance(out.get("per_canary"), list):  # the figure of each canary of a set, per seed (issue 37)
        out["per_canary"] = [[figure(v) for v in row] if isinstance(row, list) else row for row in out["per_canary"]]
    return out
