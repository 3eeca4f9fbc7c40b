"""Membership inference: :mod:`.attack` (``measure`` over one scorer, ROC figures), :mod:`.methods`
(each method's statistic and ``auto``), :mod:`.rmia` (Zarifzadeh et al. 2024), :mod:`.lira` (Carlini et al.
2022), :mod:`.reference_free` (loss, zlib, Min-K%), :mod:`.references` (reference models from the target's
recipe), :mod:`.records` (members and non-members as utterances), :mod:`.figures` (AUC, TPR at FPR) and
:mod:`.assertion` (``measure_membership`` / ``assert_membership_*``).
"""
