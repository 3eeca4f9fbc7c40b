"""Auditing DP-SGD training claims (issue 25): one-run and many-run lower bounds on epsilon,
audit canaries, and DP-SGD training of the built-in targets through Opacus (an optional extra,
imported lazily)."""
