"""A pool's band in words: on the line that prints the pool, only where the pool is not exact."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvplan.engines.band import PoolBand, pool_band
from kvplan.plan.band_verdict import BandVerdict

if TYPE_CHECKING:  # a type only: admit's report never loads the gate (its 5 record classes)
    from kvplan.plan.gate import GateResult


def band_clause(band: PoolBand, shown: int) -> str:
    """'(band 529,600 – 605,696: pre-load free estimated ±1.6 %)' around ``shown`` (the figure the line prints:
    vLLM's usable tokens sit a null block below its logged pool, so the band moves with it); '' when exact."""
    if band.exact:
        return ""
    off = band.point - shown
    why = ", ".join(f"{t.label} estimated {t.percent}" for t in band.estimates if t.ppm)
    return f"(band {band.low - off:,} – {band.high - off:,}: {why})"


def pool_words(band: PoolBand, shown: int, unit: str = "") -> str:
    """'≈ 567,616 tokens (band …)' where the pool is estimated, '567,616 tokens' where it is exact."""
    clause = band_clause(band, shown)
    figure = f"{shown:,}{unit}"
    return f"≈ {figure} {clause}" if clause else figure


def banded_verdict(verdict: str, bv: BandVerdict, shown: int) -> str:
    """The verdict with its band: a flip inside the band leads ('ADMITTED at the point estimate; rejected at the
    low end of the band'), and the pool the verdict names says '≈ N (band …)'; an exact plan's verdict is as
    before."""
    if bv.band.exact:
        return verdict
    words = bv.words()
    if words:
        head, _, rest = verdict.partition(":")
        verdict = f"{words}{head.removeprefix('ADMITTED').removeprefix('REJECTED')}:{rest}"
    return with_band(verdict, bv.band, shown)


def with_band(text: str, band: PoolBand, shown: int) -> str:
    """'… the pool holds 567,616 …' -> '… the pool holds ≈ 567,616 (band …) …'; text without that phrase gets
    '; pool ≈ N tokens (band …)' at its end; unchanged where the band is exact."""
    if band.exact:
        return text
    said = f"the pool holds {shown:,}"
    at = text.find(said)
    if at < 0:
        return f"{text}; pool {pool_words(band, band.point, ' tokens')}"
    end = at + len(said)
    end += len(" tokens") if text.startswith(" tokens", end) else 0
    held = text[at:end].replace(f"{shown:,}", f"≈ {shown:,}")
    return f"{text[:at]}{held} {band_clause(band, shown)}{text[end:]}"


def gate_band(r: GateResult) -> str:
    """'(band …)' beside a gate's pool figure now; '' where exact or not planned."""
    return band_clause(pool_band(r.plan), r.after.pool_tokens) if r.plan is not None else ""
