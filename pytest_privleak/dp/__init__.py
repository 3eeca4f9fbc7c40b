"""Auditing DP-SGD training claims (issue 25), all in this wing: :mod:`.audit` (``measure_dp_training``: train
with and without canaries, score them, bound epsilon) and :mod:`.assertion` (``assert_dp_training_holds``);
one-run and many-run lower bounds on epsilon, audit canaries, and DP-SGD training of the built-in targets
through Opacus (an optional extra, imported lazily).

The bound maths (``one_run``, ``distinguish``, ``fdp``, ``steinke``) imports only numpy, scipy and,
lazily, dp_accounting. This package's ``__init__`` imports nothing: ``targets.training`` imports
``dp.opacus_training``, so an eager import here of a module that imports ``targets`` would make a cycle.
"""
