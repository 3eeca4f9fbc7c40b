"""Exposure of canaries: :mod:`.figure` (the formula, d-exposure-discriminative eq. 1; the Secret Sharer),
:mod:`.attack` (exact, sampled and extrapolated exposure through a sequence scorer), :mod:`.assertion`
(``measure_exposure`` / ``assert_exposure_below``), :mod:`.mask_canary` (the rank of a Mix And Match
canary's token, through that family's search); d-exposure of discriminative taggers in
:mod:`.discriminative` and :mod:`.discriminative_assertion`.
"""
