"""A small joint intent + slot model: the kind of model repository pytest-privleak is for."""
