"""``LeakResult``: one measured privacy figure with everything a reader needs to judge it.

Results are recorded on the running test item (so the report and the
baseline gate see them) and turned into the assertion message.
"""
from __future__ import annotations

import functools
import inspect
import math
import numbers
import re
import threading
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Literal

Direction = Literal["at_most", "at_least"]

#: The public names of this module. The recording functions (``record``, ``set_sink``, ``set_recorder``,
#: ``mark_expected``) are the plugin's plumbing, not API: figures are recorded by the ``measure_*`` /
#: ``assert_*`` helpers, which also record the strength of their audit (issue 36).
__all__ = ["Direction", "LeakResult", "PrivacyLeakError", "expect_leak", "is_expected", "target_facts",
           "NOT_POWER", "MEASURED_POWER", "measured_power", "audit_value", "encode", "figure", "decode_result", "FIGURE_FIELDS"]


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
    #: The strength of the audit behind the figure (issue 36): the helper that measured it, the plugin's
    #: version and every setting that bounds its power (:func:`audited`); the gate compares it with the
    #: baseline's before the figures. Empty for a result built by hand.
    audit: dict[str, Any] = field(default_factory=dict)

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
    """Internal (not API). Divert this thread's results into ``sink`` instead of the plugin's recorder
    (``None``: stop diverting)."""
    _local.sink = sink


def set_recorder(recorder: Callable[[LeakResult], None] | None) -> Callable[[LeakResult], None] | None:
    """Internal (not API). Install the process-wide callable that receives every recorded result; returns the
    previous one."""
    global _recorder
    with _lock:
        previous, _recorder = _recorder, recorder
    return previous


def record(result: LeakResult) -> LeakResult:
    """Internal (not API): the helpers' recording. Hand ``result`` to the plugin (or this thread's diverting
    sink); inside :class:`expect_leak` it is expected; inside an :func:`audited` helper it gets its audit record."""
    with _lock:
        expecting, recorder = _expecting, _recorder
    if expecting:
        mark_expected(result)
    _stamp_audit(result)
    sink = getattr(_local, "sink", None)
    if sink is not None:
        sink.append(result)
    elif recorder is not None:
        recorder(result)
    return result


# --- the audit record: how strong the measurement behind each figure was (issue 36) ---------------
# Every public measure_* / assert_* helper is wrapped by `audited`: the call's arguments are bound to its
# signature (defaults applied) and each result recorded while it runs carries them in `LeakResult.audit`,
# so a new argument is recorded without anyone remembering to. The gate orders them
# (report/verdict/strength.py); tests/test_audit_record.py checks every helper's parameters are covered.

#: Parameters that are not recorded because they cannot change how strong the audit is: what is audited
#: (the model, its adapter and training configuration), how results are named, shown or cached, and the
#: second limits of an assertion (they decide its pass or fail, not the figure). Parameters without a
#: default (the model, the data, the canaries, the limit) are never recorded either.
NOT_POWER: dict[str, str] = {
    "name": "the result's label (its key in the baseline), not how it was measured",
    "tolerance": "the gate takes tolerances from the baseline or the workflow, never from the run under review",
    "cache": "where trained models are cached; a cached model is verified and equals a retrained one",
    "progress": "seconds between progress lines on stderr",
    "batch_size": "how many items are scored at once: the same scores, batched differently",
    "show_pii": "whether the evidence shows the PII found or a salted hash of it",
    "salt": "the salt of those hashes",
    "redact": "whether the evidence shows members' text",
    "wrap": "the adapter of the pipeline under test (part of what is audited, judged by its figure)",
    "config": "the training configuration of the pipeline under test (what is audited, judged by its figure)",
    "sources": "files whose content keys the cached training (a cache key, not a setting of the audit)",
    "tokenizer": "the tokenizer of the model under test (part of the model)",
    "reference_tokenizer": "the tokenizer of the reference model given by `reference` (part of that model)",
    "max_hdt_floor": "a second limit of the same assertion: it decides pass or fail, not the figure",
    "max_top5": "a second limit of the same assertion: it decides pass or fail, not the figure",
    "max_tpr_at_fpr": "a second limit of the same assertion: it decides pass or fail, not the figure",
}
_MAX_LISTED = 32
_audits = threading.local()


def audit_value(value: Any) -> Any:
    """A setting as the audit stores it: JSON scalars as they are, short lists and dicts of them item by
    item, anything else by its size (``{"count": n}``) or its type (``"<ClassName>"``): never a repr with a
    memory address, so the record is the same in every run."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        number = float(value)
        return number if math.isfinite(number) else ("Infinity" if number > 0 else "-Infinity" if number < 0
                                                     else "NaN")
    if isinstance(value, dict) and len(value) <= _MAX_LISTED:
        return {str(k): audit_value(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (list, tuple)) and len(value) <= _MAX_LISTED:
        return [audit_value(v) for v in value]
    if isinstance(value, (list, tuple, dict, set, frozenset)):
        return {"count": len(value)}
    return f"<{type(value).__name__}>"


def audited(function: Callable | None = None, *, resolved: tuple[str, ...] = ()) -> Callable:
    """Wrap a public ``measure_*`` / ``assert_*`` helper so each result it records carries its audit record.

    Recorded: every parameter with a default that is not in :data:`NOT_POWER`, and every extra keyword
    argument (``**attack``), as :func:`audit_value` gives it. ``resolved``: settings whose ``"auto"`` the
    helper resolves and names in the result's evidence (``evidence["method"] == "exact"``): the record
    keeps what ran, and what was asked under ``asked``. ``helper.__privleak_audited__`` lists the recorded
    parameters.
    """
    if function is None:
        return functools.partial(audited, resolved=resolved)
    signature = inspect.signature(function)
    params = signature.parameters.values()
    captured = tuple(p.name for p in params if p.default is not p.empty and p.name not in NOT_POWER
                     and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD))
    extra = next((p.name for p in params if p.kind is p.VAR_KEYWORD), None)

    @functools.wraps(function)
    def helper(*args, **kwargs):
        __tracebackhide__ = True
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError:
            return function(*args, **kwargs)   # the helper names the bad argument itself
        bound.apply_defaults()
        settings = {n: audit_value(bound.arguments[n]) for n in captured}
        if extra is not None:
            settings.update({k: audit_value(v) for k, v in bound.arguments.get(extra, {}).items()
                             if k not in NOT_POWER})
        stack = _audit_stack()
        stack.append({"helper": function.__name__, "settings": settings, "resolved": resolved})
        try:
            return function(*args, **kwargs)
        finally:
            stack.pop()

    helper.__privleak_audited__ = captured
    return helper


def _audit_stack() -> list:
    stack = getattr(_audits, "stack", None)
    if stack is None:
        stack = _audits.stack = []
    return stack


def _stamp_audit(result: LeakResult) -> None:
    """Give ``result`` the audit record of the outermost audited helper running in this thread (the call the
    user wrote), each of its ``resolved`` settings replaced by what ran where the result's evidence says.

    Outside any helper (the figure over seeds, recorded after its members) the record the result carries
    stays; inside one, the helper's record replaces it (a result reused from an earlier call of another
    helper must not keep that call's settings)."""
    stack = getattr(_audits, "stack", None)
    if not stack:
        return
    from . import __version__

    outer = stack[0]
    settings, asked = dict(outer["settings"]), {}
    for name in outer["resolved"]:
        ran = result.evidence.get(name)
        if name in settings and isinstance(ran, str) and ran != settings[name]:
            asked[name], settings[name] = settings[name], ran
    settings.update(measured_power(result))
    result.audit = {"helper": outer["helper"], "version": __version__, "settings": settings,
                    **({"asked": asked} if asked else {})}


#: Facts of a result that bound its audit's power though no argument of the helper sets them, recorded in its
#: audit record so that the gate orders them (more is stronger). A held-out probe passed leaks by narrowing
#: each: a membership test on 25 of its 400 members, pins drawn as a set of 2 instead of 8, and a randomiser
#: whose model code declares 2 of its 4 inputs (session 7).
MEASURED_POWER = ("members", "non_members", "canary_count", "inputs_screened")


def measured_power(result: LeakResult) -> dict[str, int]:
    """The :data:`MEASURED_POWER` facts of ``result`` (those its attack has)."""
    evidence, extra = result.evidence or {}, result.extra or {}
    out: dict[str, int] = {}
    if result.attack == "membership":
        out.update({k: int(evidence[k]) for k in ("members", "non_members")
                    if isinstance(evidence.get(k), (int, float)) and not isinstance(evidence.get(k), bool)})
    elif result.attack in ("exposure", "cea", "extraction"):
        count = extra.get("canary_count", extra.get("canaries", 1))
        out["canary_count"] = int(count) if isinstance(count, (int, float)) and math.isfinite(count) else 1
    elif result.attack == "ldp" and isinstance(extra.get("inputs_screened"), (int, float)):
        out["inputs_screened"] = int(extra["inputs_screened"])
    return out


def open_expect_leak_blocks() -> int:
    """How many :class:`expect_leak` blocks are open now, in any thread (0 at the end of a sound run)."""
    with _lock:
        return _expecting


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
