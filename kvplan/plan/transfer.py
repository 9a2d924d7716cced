"""Bytes moved for a prefill->decode hand-off or an offload of L tokens (pure).

Transfer units:
- ``page``: whole pages (64 × dcp tokens), the last partial page included (a PD hand-off moves what was written);
- ``chunk:N``: whole chunks of N tokens only, the tail dropped — vLLM's offloading connector stores only full
  chunks (vLLM recipes PR #893: 138,615 tokens -> 541 chunks of 256 -> 59,763,793,920 B over 8 ranks);
- ``token``: exactly L tokens (a lower bound no engine achieves).
Each TP rank holds its own copy of the MLA latent and the indexer K (MLA KV is replicated under TP), so the total is
per rank × ranks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kvplan.engines.common import PoolPlan
from kvplan.errors import InputError
from kvplan.units import GB, GiB, cdiv

_LINK = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(gbps|gbit/s|gb/s|gib/s|mb/s|tbps)\s*$", re.IGNORECASE)
_LINK_UNITS = {"gbps": GB // 8, "gbit/s": GB // 8, "tbps": 1000 * GB // 8, "gb/s": GB, "gib/s": GiB, "mb/s": 10**6}


def parse_link(text: str) -> int:
    """'400Gbps' -> 50,000,000,000 bytes/s; '50GB/s'; '46.5GiB/s'."""
    m = _LINK.match(text)
    if not m:
        raise InputError(f"--link {text!r}: give a speed such as 400Gbps, 50GB/s or 46.5GiB/s")
    number, unit = m.groups()
    whole, _, frac = number.partition(".")
    scale = _LINK_UNITS[unit.lower()]
    value: int = (int(whole) * 10 ** len(frac) + int(frac or "0")) * scale // 10 ** len(frac)
    if value <= 0:
        raise InputError(f"--link {text!r} must be positive")
    return value


def parse_unit(text: str) -> tuple[str, int]:
    t = text.strip().lower()
    if t in ("page", "token"):
        return t, 0
    m = re.match(r"^chunk:(\d+)$", t)
    if m and int(m.group(1)) > 0:
        return "chunk", int(m.group(1))
    raise InputError(f"--unit {text!r}: use page, token or chunk:N (e.g. chunk:256)")


@dataclass(frozen=True, kw_only=True)
class Transfer:
    plan: PoolPlan
    ctx_tokens: int
    unit: str
    chunk_tokens: int
    moved_tokens: int
    ranks: int
    link_bytes_per_s: int

    @property
    def rows_per_rank(self) -> int:
        """Pool rows one rank sends: moved tokens / dcp (each rank holds every dcp-th token)."""
        return cdiv(self.moved_tokens, self.plan.dcp)

    @property
    def main_bytes_per_rank(self) -> int:
        return self.rows_per_rank * (self.plan.cell.main_bytes + self.plan.cell.draft_main_bytes)

    @property
    def indexer_bytes_per_rank(self) -> int:
        return self.rows_per_rank * (self.plan.cell.indexer_bytes + self.plan.cell.draft_indexer_bytes)

    @property
    def bytes_per_rank(self) -> int:
        return self.main_bytes_per_rank + self.indexer_bytes_per_rank

    @property
    def total_bytes(self) -> int:
        return self.bytes_per_rank * self.ranks

    def microseconds(self, n_bytes: int) -> int:
        return cdiv(n_bytes * 1_000_000, self.link_bytes_per_s)


def transfer(plan: PoolPlan, ctx: int, *, unit: str = "page", link: str = "400Gbps") -> Transfer:
    if ctx <= 0:
        raise InputError(f"--ctx must be positive, got {ctx}")
    kind, n = parse_unit(unit)
    page = plan.logical_page_tokens
    if kind == "page":
        moved = cdiv(ctx, page) * page
    elif kind == "chunk":
        moved = ctx // n * n
    else:
        moved = ctx
    return Transfer(
        plan=plan,
        ctx_tokens=ctx,
        unit=kind,
        chunk_tokens=n,
        moved_tokens=moved,
        ranks=plan.deployment.tp,
        link_bytes_per_s=parse_link(link),
    )
