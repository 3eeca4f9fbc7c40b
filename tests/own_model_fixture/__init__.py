"""A team's own tiny model package for the train_own_model tests: its source is part of the cache key."""
