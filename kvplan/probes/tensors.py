"""The exact tensors an engine allocates for a plan (pure: shapes and dtypes, no torch)."""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.engines.common import PoolPlan
from kvplan.models.costs import KvHeads
from kvplan.plan.workspace import Workspace

_ITEMSIZE = {"uint8": 1, "int8": 1, "int32": 4, "float32": 4, "bfloat16": 2, "float16": 2}


@dataclass(frozen=True)
class TensorSpec:
    name: str
    shape: tuple[int, ...]
    dtype: str
    group: str
    """'pool' (counted in the plan's allocation), 'table', 'buffer' or 'workspace'."""

    @property
    def nbytes(self) -> int:
        n = _ITEMSIZE[self.dtype]
        for d in self.shape:
            n *= d
        return n


def pool_tensors(plan: PoolPlan) -> list[TensorSpec]:
    """SGLang: per-layer MLA rows (size + page), per-layer index-K pages (0 rows on shared layers), the draft pool,
    req_to_token. vLLM: one int8 backing tensor of num_blocks × bytes_per_block, the DSA buffers."""
    return _sglang(plan) if plan.engine == "sglang" else _vllm(plan)


def _mha_buffers(p: PoolPlan, kv: KvHeads, rows: int, prefix: str, layers: int) -> list[TensorSpec]:
    """SGLang MHATokenToKVPool._create_buffers: per layer k_buffer (rows, heads, head_dim) and v_buffer
    (rows, heads, v_head_dim) in the store dtype (fp8 caches are stored as uint8)."""
    heads = kv.per_rank
    dtype = p.kv_dtype if p.kv_dtype in ("bfloat16", "float16") else "uint8"
    out: list[TensorSpec] = []
    for i in range(layers):
        out.append(TensorSpec(f"{prefix}k_buffer[{i}]", (rows, heads, kv.head_dim), dtype, "pool"))
        out.append(TensorSpec(f"{prefix}v_buffer[{i}]", (rows, heads, kv.v_head_dim), dtype, "pool"))
    return out


def _sglang(p: PoolPlan) -> list[TensorSpec]:
    a = p.arch
    page = p.page_tokens
    kv = a.attention.heads(p.attn_tp)
    if kv is not None:
        out = _mha_buffers(p, kv, p.rows + page, "", a.num_layers)
        if p.draft_layers:
            out += _mha_buffers(p, kv, p.rows + page, "draft_", p.draft_layers)
        extra = p.extras["req_to_token_bytes"] // 4 // (p.max_running_requests + 1)
        out.append(TensorSpec("req_to_token", (p.max_running_requests + 1, extra), "int32", "table"))
        return out
    mla_row = p.mla_bytes_per_layer if p.mla_layout is None else p.mla_layout.bytes_per_token_layer(
        a.kv_lora_rank, a.qk_rope_head_dim)  # fmt: skip
    out = [TensorSpec(f"kv_buffer[{i}]", (p.rows + page, 1, mla_row), "uint8", "pool") for i in range(a.num_layers)]
    if a.is_dsa:
        row = page // a.index_kpool * (a.index_head_dim + a.index_head_dim // 128 * 4)
        full = (True,) * a.num_layers if p.indexer_layers == a.num_layers else a.indexer_full  # 0.5.9: every layer
        pages = p.extras["index_pages_per_layer"]
        out += [TensorSpec(f"index_k[{i}]", (pages if f else 0, row), "uint8", "pool") for i, f in enumerate(full)]
    if p.draft_layers:
        d_size, d_page = p.rows * p.dcp, page * p.dcp
        d_pages = (d_size + d_page + 1) // d_page
        for i in range(p.draft_layers):
            out.append(TensorSpec(f"draft_kv_buffer[{i}]", (d_size + d_page, 1, mla_row), "uint8", "pool"))
            out.append(
                TensorSpec(f"draft_index_k[{i}]", (d_pages, d_page * p.indexer_bytes_per_layer), "uint8", "pool")
            )
    extra = p.extras["req_to_token_bytes"] // 4 // (p.max_running_requests + 1)
    out.append(TensorSpec("req_to_token", (p.max_running_requests + 1, extra), "int32", "table"))
    return out


def _vllm(p: PoolPlan) -> list[TensorSpec]:
    e = p.extras
    out = [TensorSpec("kv_cache (all layers)", (e["num_blocks"] * e["bytes_per_block"],), "int8", "pool")]
    topk = p.arch.index_topk
    if p.arch.is_dsa:
        mnbt = e["max_num_batched_tokens"]
        copies = 2 if p.deployment.mtp else 1
        out += [TensorSpec(f"topk_indices_buffer[{i}]", (mnbt, topk), "int32", "buffer") for i in range(copies)]
        rows = min(mnbt, p.max_running_requests * (1 + p.deployment.speculative_num_draft_tokens))
        layers = p.indexer_layers + p.draft_layers
        for i in range(layers):
            out.append(TensorSpec(f"physical_topk_indices[{i}]", (rows + 1, topk), "int32", "buffer"))
            out.append(TensorSpec(f"valid_topk_counts[{i}]", (rows + 1,), "int32", "buffer"))
        entries = e["indexer_prefill_buffer_bytes"] // p.indexer_bytes_per_layer
        out.append(TensorSpec("indexer_prefill_buffer", (entries, p.indexer_bytes_per_layer), "uint8", "buffer"))
    return out


def workspace_tensors(w: Workspace) -> list[TensorSpec]:
    """The transient buffers the plan says fit: one prefill logits chunk at the budget and the top-k indices."""
    pre = w.prefill
    if pre is None:  # no DSA indexer: no indexer logits or top-k buffers
        return []
    topk = w.plan.arch.index_topk
    return [
        TensorSpec("prefill logits chunk", (pre.rows_per_chunk, pre.cols), "float32", "workspace"),
        TensorSpec("prefill top-k indices", (pre.rows, topk), "int32", "workspace"),
    ]


def predicted_bytes(plan: PoolPlan) -> int:
    """What the plan's own arithmetic says the pool tensors take (no tensor shapes involved)."""
    if plan.engine == "sglang":
        return plan.allocated_bytes + plan.extras["req_to_token_bytes"]
    e = plan.extras
    return plan.allocated_bytes + sum(
        e.get(k, 0) for k in ("topk_indices_buffer_bytes", "physical_topk_bytes", "indexer_prefill_buffer_bytes")
    )
