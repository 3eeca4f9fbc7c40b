"""Work over workers, GPUs and hosts: the device of a worker (:mod:`.device`), the host of a ``--tx`` spec
(:mod:`.placement`), xdist scheduling by target (:mod:`.scheduling`), CI shards (:mod:`.sharding`) and the
durations of the last run that order both (:mod:`.durations`)."""
