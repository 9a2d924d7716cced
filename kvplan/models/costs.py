"""What a cache kind answers about itself beyond its bytes per token: its cost on one GPU for a plan's split and
dtypes (``KindCost``, asked with a ``CostBasis``) and how TP splits its kv heads (``KvHeads``)."""

from __future__ import annotations

from kvplan import record
from kvplan.models.formats import MlaLayout


@record
class CostBasis:
    """What a kind's cost on one GPU depends on: the attention split, the KV dtype, the engine (a state's element
    sizes) and the MLA row layout the engine picked (None: no MLA row)."""

    attn_tp: int
    kv_dtype: str
    engine: str
    mla_layout: MlaLayout | None


@record(kw_only=True)
class KindCost:
    """One cache kind of a hybrid model on ONE GPU, model-level (before any pool's page rounding).

    ``per``: 'token' (full attention, MLA, indexer K: grows with the context), 'window' (sliding window: grows up
    to ``window`` tokens, then stays) or 'request' (linear-attention / Mamba state: a fixed size a request).
    """

    kind: str
    layers: int
    per: str
    bytes_per_token: int
    """Over all the kind's layers on one rank; 0 for a state kind."""
    window: int = 0
    request_max_bytes: int = 0
    """The most one request holds of this kind: window × bytes per token, or the state's bytes; 0 = unbounded."""


@record
class KvHeads:
    """How tensor parallelism splits an attention kind's kv heads: of ``num_kv_heads``, ``per_rank`` on each
    attention rank (at least one: replicated when there are fewer heads than ranks), each K ``head_dim`` and V
    ``v_head_dim`` wide."""

    num_kv_heads: int
    per_rank: int
    head_dim: int
    v_head_dim: int
