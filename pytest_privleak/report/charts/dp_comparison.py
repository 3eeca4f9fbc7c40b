"""Each figure with and without DP-SGD, side by side (issue 25 item 4).

Two results are a pair when they measure the same figure (``name``: attack and
metric) under the same label, on targets of the same kind, seed and config
except the config's ``dp``: one trained without DP, one with it. A target's
facts come from ``LeakResult.target`` (``describe()`` of a built-in target:
``kind``, ``seed``, ``config``, and ``dp`` with the epsilon its accountant
spent); a result whose target facts give only a content hash (the CEA records
``content_hash``, ``device`` and ``type``) borrows the facts another result of
the same report recorded for that hash.

:func:`dp_rows` gives one row per DP result that has a non-DP partner: the
figure without DP, with DP, the ratio, the claimed and the spent epsilon.
The HTML section (:func:`dp_section_html`) is empty when there is no pair;
the Markdown summary renders the same rows.
"""
from __future__ import annotations

import json
from html import escape
from typing import Any

from ..model import figure
from .svg import sig3


def _facts_by_hash(report: dict[str, Any]) -> dict[str, dict]:
    """Content hash -> the fullest target facts any result recorded for it (those holding a ``config``)."""
    found: dict[str, dict] = {}
    for test in report.get("tests", []):
        for r in test.get("results", []):
            target = r.get("target") or {}
            digest = target.get("content_hash")
            if isinstance(digest, str) and isinstance(target.get("config"), dict):
                found.setdefault(digest, target)
    return found


def _target(r: dict[str, Any], by_hash: dict[str, dict]) -> dict | None:
    target = r.get("target") or {}
    if not isinstance(target.get("config"), dict):
        target = by_hash.get(target.get("content_hash") if isinstance(target.get("content_hash"), str) else "")
    return target if target and isinstance(target.get("config"), dict) else None


def _pair_key(r: dict[str, Any], target: dict) -> str:
    """What two results must share to be compared: the figure, its label, the kind, seed and non-DP config."""
    config = {k: v for k, v in target["config"].items() if k != "dp"}
    return json.dumps([r.get("name"), r.get("label") or "", target.get("kind"), target.get("seed"), config],
                      sort_keys=True, default=str)


def dp_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per DP-trained result with a non-DP partner, in report order.

    Row: ``name``, ``label``, ``without`` and ``with_dp`` (the figures),
    ``ratio`` (with / without; None when the figure without DP is 0),
    ``epsilon`` (claimed), ``epsilon_spent``, ``delta``, ``direction`` and the
    two tests' node ids.
    """
    by_hash = _facts_by_hash(report)
    plain: dict[str, tuple[dict, dict]] = {}
    private: list[tuple[str, dict, dict, dict]] = []
    for test in report.get("tests", []):
        for r in test.get("results", []):
            target = _target(r, by_hash)
            if target is None:
                continue
            key = _pair_key(r, target)
            dp = target["config"].get("dp")
            if dp:
                private.append((key, test, r, {**dp, **(target.get("dp") or {})}))
            else:
                plain.setdefault(key, (test, r))
    rows = []
    for key, test, r, dp in private:
        if key not in plain:
            continue
        base_test, base = plain[key]
        without, with_dp = figure(base["value"]), figure(r["value"])
        rows.append({"name": r["name"], "label": r.get("label") or "", "without": without, "with_dp": with_dp,
                     "ratio": with_dp / without if without else None, "epsilon": dp.get("epsilon"),
                     "epsilon_spent": dp.get("epsilon_spent"), "delta": dp.get("delta"),
                     "direction": r.get("direction"), "test": test["nodeid"], "test_without": base_test["nodeid"]})
    return rows


def _n(value: Any) -> str:
    return "" if value is None else escape(sig3(float(value)))


def dp_section_html(report: dict[str, Any]) -> str:
    """``<h2>`` and a table of :func:`dp_rows`; empty when no figure was measured both with and without DP."""
    rows = dp_rows(report)
    if not rows:
        return ""
    body = "".join(
        f"<tr><td>{escape(r['name'])}</td><td>{escape(r['label'])}</td><td class=\"num\">{_n(r['without'])}</td>"
        f"<td class=\"num\">{_n(r['with_dp'])}</td><td class=\"num\">{_n(r['ratio'])}</td>"
        f"<td class=\"num\">{_n(r['epsilon'])}</td><td class=\"num\">{_n(r['epsilon_spent'])}</td>"
        f"<td class=\"num\">{_n(r['delta'])}</td><td>{escape(r['test_without'])}<br>{escape(r['test'])}</td></tr>"
        for r in rows)
    return ('<h2 id="dp">With and without DP-SGD</h2><p class="meta">The same figure on the same kind of '
            "target, seed and config, trained without and with DP-SGD; ratio = with DP / without; spent \u03b5 is "
            "the accountant's after training.</p><table class=\"dp\"><tr><th>metric</th><th>canary / target</th>"
            "<th>without DP</th><th>with DP</th><th>ratio</th><th>\u03b5</th><th>spent \u03b5</th><th>\u03b4</th>"
            f"<th>tests (without, with)</th></tr>{body}</table>")
