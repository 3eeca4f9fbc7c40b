"""Live progress of target training and long audits through pytest's terminal writer, issue 11 item 7."""
from __future__ import annotations
