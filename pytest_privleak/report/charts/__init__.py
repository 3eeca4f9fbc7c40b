"""The report's charts, drawn by hand as inline SVG (no plotting library, no script, no network):
:mod:`.svg` (bar charts and their axes), :mod:`.roc` (membership ROC curves), :mod:`.seeds` (per-seed dot
plots beside the baseline's) and :mod:`.dp_comparison` (each figure with and without DP-SGD).
"""
