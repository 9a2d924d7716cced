"""A pool's band in words: on the line that prints the pool, only where the pool is not exact."""

from __future__ import annotations

from kvplan.engines.band import PoolBand
from kvplan.plan.band_verdict import BandVerdict


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
    said = f"the pool holds {shown:,}"
    at = verdict.find(said)
    if at < 0:
        return f"{verdict}; pool {pool_words(bv.band, bv.band.point, ' tokens')}"
    end = at + len(said)
    end += len(" tokens") if verdict.startswith(" tokens", end) else 0
    said_all = verdict[at:end]
    return (
        f"{verdict[:at]}{said_all.replace(f'{shown:,}', f'≈ {shown:,}')} {band_clause(bv.band, shown)}{verdict[end:]}"
    )
