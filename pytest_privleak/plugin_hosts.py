"""xdist workers on several hosts (--tx ssh=...): per-host device numbering and the host of each result, issue 11 item 2."""
from __future__ import annotations
