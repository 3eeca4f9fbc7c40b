"""DP-SGD training of the built-in targets through Opacus (an optional extra, imported lazily): :mod:`.opacus`
(Poisson batches, per-sample clipping, noise and the accountant, ``dp=`` of ``train_target``) and :mod:`.crf`
(the per-sample gradients of pytorch-crf's CRF, which Opacus has no sampler for). The DP-SGD *audit* is the
``dp`` wing, above this one.
"""
