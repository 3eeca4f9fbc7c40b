"""The privacy report and the gate: the report model, its JSON / HTML / Markdown / terminal writers, shard merge,
and the baseline gate (:mod:`.gate`) that fails a merge when leakage grew."""
