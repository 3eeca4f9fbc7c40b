"""Writers of the privacy report: terminal table, JSON, HTML, Markdown."""
