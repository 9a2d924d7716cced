"""One command regenerates everything derived from the config-alone corpus (issue 28 item 3):

    python -m tests.runbook.config_alone --write

rewrites kvplan/engines/band.py's ERRORS block (every case's term error, fitted on every source), README's
config-alone table (each case planned from its config alone) and README's leave-one-source-out block (the three
figures and each case's held-out band). A case added to the corpus changes all three; the tests in
tests/runbook/test_config_alone.py and test_config_alone_band.py say which is stale.
"""

from __future__ import annotations

from tests.runbook.config_alone import ROOT, table
from tests.runbook.config_alone.loso import fit, measured, report, table_literal

BAND = ROOT / "kvplan" / "engines" / "band.py"
README = ROOT / "README.md"
ERRORS_BEGIN, ERRORS_END = "# BEGIN ERRORS (generated)\n", "# END ERRORS (generated)\n"
TABLE_BEGIN = "<!-- BEGIN config-alone table: python -m tests.runbook.config_alone --write -->\n"
TABLE_END = "<!-- END config-alone table -->\n"
LOSO_BEGIN = "<!-- BEGIN config-alone LOSO: python -m tests.runbook.config_alone --write -->\n"
LOSO_END = "<!-- END config-alone LOSO -->\n"


def between(text: str, begin: str, end: str, body: str) -> str:
    """``text`` with what lies between the two marker lines replaced by ``body``."""
    i, j = text.index(begin) + len(begin), text.index(end)
    return text[:i] + body.rstrip("\n") + "\n" + text[j:]


def loso_block() -> str:
    figures, rows = report().split("\n\n", 1)
    return f"```text\n{figures}\n```\n\n{rows}"


def write() -> list[str]:
    """Rewrite the three generated blocks; the files that changed."""
    changed = []
    band = BAND.read_text(encoding="utf-8")
    new_band = between(band, ERRORS_BEGIN, ERRORS_END, table_literal(fit(measured())))
    readme = README.read_text(encoding="utf-8")
    new_readme = between(between(readme, TABLE_BEGIN, TABLE_END, table()), LOSO_BEGIN, LOSO_END, loso_block())
    for path, old, new in ((BAND, band, new_band), (README, readme, new_readme)):
        if new != old:
            path.write_text(new, encoding="utf-8")
            changed.append(str(path.relative_to(ROOT)))
    return changed


def in_readme() -> tuple[bool, bool]:
    """(README's config-alone table is current, README's LOSO block is current)."""
    text = README.read_text(encoding="utf-8")
    return TABLE_BEGIN + table() + "\n" + TABLE_END in text, LOSO_BEGIN + loso_block() + "\n" + LOSO_END in text
