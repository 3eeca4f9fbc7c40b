"""Canary extraction (canary-extraction-nlu §3.1, Appendix B): :mod:`.attack` (gradient, trivial and
exhaustive search for a canary's secret through a soft-input model) and :mod:`.assertion`
(``measure_cea`` / ``assert_cea_accuracy_at_most``).
"""
