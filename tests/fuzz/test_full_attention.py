"""Fuzz the per-layer cache model (issue 11): any full-attention shape, parallel layout, dtype, backend and GPU
either plans with the kind's own bytes per token and nothing negative, or raises kvplan's InputError (exit 2)."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from kvplan.engines import plan_pool
from kvplan.errors import InputError
from kvplan.models.cache import FullAttention
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model
from kvplan.models.gpus import gpu_catalog

DEPLOYS = {e: load_deployment(f"glm-5.3-8xh200-{e}") for e in ("sglang", "vllm")}
LLAMA = load_model("llama-3.1-8b")


@given(
    st.sampled_from(sorted(DEPLOYS)),
    st.sampled_from(sorted(gpu_catalog())),
    st.integers(min_value=1, max_value=64),  # kv heads
    st.integers(min_value=1, max_value=8),  # query heads per kv head
    st.sampled_from([64, 80, 96, 128, 192, 256]),
    st.integers(min_value=1, max_value=128),  # layers
    st.sampled_from([1, 2, 4, 8, 16]),
    st.sampled_from([1, 2, 4, 8]),
    st.sampled_from(["auto", "bf16", "fp16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_ds_mla"]),
    st.sampled_from([None, "fa3", "flashinfer", "triton", "trtllm_mha", "FLASH_ATTN", "FLASHINFER", "flashmla"]),
)
def test_any_full_attention_model(
    engine: str, gpu: str, kv: int, group: int, hd: int, layers: int, tp: int, dp: int, dtype: str, backend: str | None
) -> None:
    arch = replace(LLAMA, num_layers=layers, num_kv_heads=kv, num_attention_heads=kv * group, head_dim=hd,
                   v_head_dim=hd, param_groups=())  # fmt: skip
    dep = replace(
        DEPLOYS[engine],
        gpu=gpu_catalog()[gpu],
        tp=tp,
        dp_attention=dp if tp % dp == 0 else 1,
        kv_cache_dtype=dtype,
        attention_backend=backend,
        page_size=None,
        weights_per_gpu=1 << 30,
        context_length=8192,
    )
    try:
        p = plan_pool(arch, dep)
    except InputError as e:
        assert str(e) and "\n" not in str(e)
        return
    attn_tp = max(tp // dep.dp_attention, 1)
    per = FullAttention(kv, hd, hd).kv_heads_per_rank(attn_tp)
    size = 1 if dtype.startswith("fp8") else 2
    assert p.cell.main_bytes == layers * per * (hd + hd) * size
    assert p.cell.indexer_bytes == 0 and p.indexer_layers == 0
    assert min(p.rows, p.usable_pages, p.available_bytes, p.allocated_bytes) >= 0
    assert p.mla_layout is None and p.kv_format in ("bf16", "fp16", "fp8", "fp8_e4m3", "fp8_e5m2")
