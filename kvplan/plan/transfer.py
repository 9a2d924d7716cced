"""Bytes moved for a prefill->decode hand-off or an offload of L tokens (pure).

Transfer units:
- ``page``: whole pages (64 × dcp tokens), the last partial page included (a PD hand-off moves what was written);
- ``chunk:N``: whole chunks of N tokens only, the tail dropped — vLLM's offloading connector stores only full
  chunks (vLLM recipes PR #893: 138,615 tokens -> 541 chunks of 256 -> 59,763,793,920 B over 8 ranks);
- ``token``: exactly L tokens (a lower bound no engine achieves).
Each rank sends the rows it holds. Without dcp every TP rank holds the whole MLA latent and indexer K (TP replicates
them), so the total is per rank × tp. Under dcp the tokens are split across the dcp ranks (rank r holds every
dcp-th token), so each rank sends moved / dcp rows and the tp ranks hold tp / dcp copies of each token.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kvplan.engines.common import PoolPlan
from kvplan.errors import InputError
from kvplan.plan.budget import kind_costs
from kvplan.units import cdiv, parse_link, parse_positive_tokens


def parse_unit(text: str) -> tuple[str, int]:
    t = text.strip().lower()
    if t in ("page", "token"):
        return t, 0
    m = re.match(r"^chunk:(.+)$", t)
    if m:
        try:
            return "chunk", parse_positive_tokens(m.group(1), "--unit chunk size")
        except InputError as e:
            raise type(e)(f"--unit {text[:40]!r}: {e}") from None
    raise InputError(f"--unit {text!r}: use page, token or chunk:N (e.g. chunk:256)")


@dataclass(frozen=True, kw_only=True)
class KindMove:
    """What one rank sends for one hybrid kind beyond the full-attention rows (a window's rows, a state)."""

    kind: str
    per: str
    """'window' or 'request'."""
    tokens: int
    """Rows moved (window kinds); 0 for a state."""
    bytes_per_rank: int
    how: str


# A hybrid's hand-off, as the engines move it:
#
# A hybrid moves per kind. SGLang 0.5.23 (``srt/disaggregation/prefill.py`` ``send_kv_chunk``, last
# chunk): the full-attention pages of every token; for the sliding-window layers only the window
# (``_swa_payload``: window_start = max(decode prefix, seq_len − sliding_window_size) rounded down to a page, the
# pages from there to seq_len); for the linear-attention layers the request's one Mamba state slot
# (``_mamba_payload``). vLLM: ASSUMPTION, its connectors' hybrid paths were not read: the same per-kind amounts (the
# window's blocks, one state per request, unpadded).
def hybrid_moves(plan: PoolPlan, ctx: int, moved: int, unit: str) -> tuple[KindMove, ...]:
    """The window and state kinds' share of a hand-off of ``ctx`` tokens (empty for a uniform plan).

    Page unit: SGLang's ``_swa_payload`` pages: start = (ctx − window) // page × page, cdiv(ctx − start, page)
    pages; token / chunk units: min(window, moved) tokens. A state kind: one request's state.
    """
    page = plan.logical_page_tokens
    out = []
    for k in kind_costs(plan):
        if k.per == "window":
            if unit == "page":
                start = max(ctx - k.window, 0) // page * page
                rows = min(cdiv(ctx - start, page) * page, moved)
                span = f"max({ctx:,} − {k.window:,}, 0) // {page} × {page} = {start:,}"
                how = f"the window's pages: from {span} to {ctx:,}"
            else:
                rows = min(k.window, moved)
                how = f"the last min(window {k.window:,}, moved) tokens"
            out.append(KindMove(kind=k.kind, per="window", tokens=rows, bytes_per_rank=rows * k.bytes_per_token,
                                how=f"{how}: {rows:,} rows × {k.bytes_per_token:,} B"))  # fmt: skip
        elif k.per == "request":
            out.append(KindMove(kind=k.kind, per="request", tokens=0, bytes_per_rank=k.request_max_bytes,
                                how=f"one state per request over {k.layers} layers"))  # fmt: skip
    return tuple(out)


@dataclass(frozen=True, kw_only=True)
class Transfer:
    plan: PoolPlan
    ctx_tokens: int
    unit: str
    chunk_tokens: int
    moved_tokens: int
    ranks: int
    link_bytes_per_s: int
    hybrid: tuple[KindMove, ...] = ()
    """A hybrid's window and state kinds (main_bytes_per_rank holds its full-attention rows)."""
    full_rows: bool = True
    """False when no kind costs per token (an all-sliding-window model): no full-attention rows move."""

    @property
    def rows_per_rank(self) -> int:
        """Pool rows one rank sends: moved tokens / dcp (each rank holds every dcp-th token)."""
        return cdiv(self.moved_tokens, self.plan.dcp)

    @property
    def full_row_bytes(self) -> int:
        """Bytes of one moved row of the full-attention (main) layers; 0 when a hybrid has no per-token kind: an
        all-sliding-window model's cell is its SWA pool's row, and only the window moves (``_swa_payload``)."""
        if not self.full_rows:
            return 0
        return self.plan.cell.main_bytes + self.plan.cell.draft_main_bytes

    @property
    def main_bytes_per_rank(self) -> int:
        return self.rows_per_rank * self.full_row_bytes

    @property
    def indexer_bytes_per_rank(self) -> int:
        return self.rows_per_rank * (self.plan.cell.indexer_bytes + self.plan.cell.draft_indexer_bytes)

    @property
    def hybrid_bytes_per_rank(self) -> int:
        return sum(m.bytes_per_rank for m in self.hybrid)

    @property
    def bytes_per_rank(self) -> int:
        return self.main_bytes_per_rank + self.indexer_bytes_per_rank + self.hybrid_bytes_per_rank

    @property
    def total_bytes(self) -> int:
        """Per rank × ranks; under pp each stage's ranks send their own layers' rows (summed over the stages)."""
        if self.plan.stages:
            return self.rows_per_rank * self.plan.model_cell_bytes * self.ranks
        return self.bytes_per_rank * self.ranks

    @property
    def copies(self) -> int:
        """How many ranks hold each token's rows: tp without dcp (TP replicates the latent), tp / dcp under dcp;
        full attention: each kv head on attention-tp / kv-heads ranks (1 when the heads split evenly)."""
        heads = self.plan.arch.attention.heads(self.plan.attn_tp)
        if heads is not None:
            return max(self.plan.attn_tp // heads.num_kv_heads, 1)
        return max(self.ranks // self.plan.dcp, 1)

    @property
    def sharding(self) -> str:
        """Why the total is per rank × ranks, in the plan's own terms (dcp splits, TP replicates)."""
        pp = len(self.plan.stages)
        stages = f"; pp {pp}: each stage's ranks send their own layers (per rank: the binding stage's)" if pp else ""
        return self._sharding() + stages

    def _sharding(self) -> str:
        dcp, tp = self.plan.dcp, self.ranks
        heads = self.plan.arch.attention.heads(self.plan.attn_tp)
        if heads is not None:
            per = heads.per_rank
            text = f"TP shards the {heads.num_kv_heads} kv heads, {per} per rank at attention tp {self.plan.attn_tp}"
            return text + (f", each head on {self.copies} ranks (replicated)" if self.copies > 1 else "")
        if dcp <= 1:
            return f"TP replicates the MLA latent on each of the {tp} ranks"
        split = f"dcp {dcp} splits the tokens across {dcp} ranks, each sending 1/{dcp} of the rows"
        if self.plan.engine == "sglang" and self.plan.cell.indexer_bytes:
            split += ", but SGLang keeps the whole indexer K on each rank"
        if self.copies == 1:
            return split
        return f"{split}; TP {tp} keeps {self.copies} copies of each token"

    @property
    def link_bits_per_s(self) -> int:
        return self.link_bytes_per_s * 8

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
        hybrid=hybrid_moves(plan, ctx, moved, kind) if plan.pools else (),
        full_rows=not plan.pools or any(k.per == "token" for k in kind_costs(plan)),
    )
