"""What the gate decides beyond the figures: the strength of the audit behind each figure, and the verdict
reached as a command outside the run under review (``python -m pytest_privleak gate``)."""
