"""CI sharding (--privleak-shard=i/n) and merging shard reports (--privleak-merge-reports), issue 11 item 4."""
from __future__ import annotations
