"""How the doctor's report writes a logged figure: GiB as the engine printed it, a line's place in the log, a pool's
value in its own unit, a ratio, a comparison's range."""

from __future__ import annotations

from typing import Any

from kvplan.render import size
from kvplan.runbook.doctor import Cause, Comparison, LoggedPool
from kvplan.runbook.parse import At, Gib

UNITS = {"tokens": "tokens", "rows": "rows per rank", "blocks": "blocks", "needed": "B needed"}


def logged_gib(g: Gib) -> str:
    """A figure as the log printed it (SGLang's "GB" are GiB)."""
    return f"{g.text} GiB"


def where(at: At[Any] | None) -> str:
    if at is None:
        return ""
    return f"line {at.line}" + (f", {at.rank}" if at.rank else "")


def pool_value(lp: LoggedPool, v: int) -> str:
    return size(v) if lp.unit == "needed" else f"{v:,} {UNITS[lp.unit]}"


def ratio(num: int, den: int) -> str:
    return f"{num:,}/{den:,} = {num / den:.4f}" if den else "n/a"


def range_text(c: Comparison | Cause, lp: LoggedPool) -> str:
    if c.low == c.high:
        return pool_value(lp, c.low)
    if lp.unit == "needed":
        return f"{size(c.low)} – {size(c.high)}"
    return f"{c.low:,} – {c.high:,} {UNITS[lp.unit]}"
