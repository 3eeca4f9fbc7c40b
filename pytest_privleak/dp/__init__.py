"""Auditing DP-SGD training claims (issue 25), all in this wing: :mod:`.audit` (``measure_dp_training``: train
with and without canaries, score them, bound epsilon) and :mod:`.assertion` (``assert_dp_training_holds``);
one-run and many-run lower bounds on epsilon, audit canaries, and DP-SGD training of the built-in targets
through Opacus (an optional extra, imported lazily).

The bound maths (``one_run``, ``distinguish``, ``fdp``, ``steinke``) imports only numpy, scipy and,
lazily, dp_accounting; this package's ``__init__`` imports nothing. The audit trains through ``targets``,
which sits below it (DP-SGD training of the built-in targets is ``targets.dp_sgd``).
"""
