"""Extraction by generation: :mod:`.search` (the Secret Sharer's shortest-path search), :mod:`.attack`
(targeted extraction of a canary by search, beam and sampling), :mod:`.assertion`; untargeted extraction
(Carlini et al. 2021) in :mod:`.untargeted` and :mod:`.untargeted_assertion`; the PII already in a training
set in :mod:`.pii`.
"""
