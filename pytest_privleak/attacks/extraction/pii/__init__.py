"""The PII found in a training set (Lukas et al. 2023): :mod:`.attack` (its exposure and extraction),
:mod:`.generation` (does prompted generation reproduce an item), :mod:`.redaction` (items shown as kind, keyed
hash and length) and :mod:`.assertion` (``assert_pii_exposure_below`` / ``assert_pii_extraction_at_most``).
"""
