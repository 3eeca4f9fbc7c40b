"""``python -I -m pytest_privleak gate --baseline B REPORT...``: the gate as a command (the package's entry)."""
from pytest_privleak.report.verdict.command import main

raise SystemExit(main())
