"""Properties of the pool plans of both engines (hypothesis)."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import assume, given
from hypothesis import strategies as st

from kvplan.engines import plan_pool
from kvplan.errors import PlanError
from kvplan.models.arch import ModelArch
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model
from kvplan.units import GiB, cdiv

GLM = load_model("glm-5.3")
DEPLOYS = {e: load_deployment(f"glm-5.3-8xh200-{e}") for e in ("sglang", "vllm")}

engines = st.sampled_from(sorted(DEPLOYS))
weights = st.integers(min_value=60 * GiB, max_value=110 * GiB)
flags = st.lists(st.booleans(), min_size=78, max_size=78).map(tuple)
dcps = st.sampled_from([1, 2, 4, 8])
dtypes = st.sampled_from(["fp8", "bf16", "auto"])


def plan(engine: str, arch: ModelArch = GLM, **changes: object):  # type: ignore[no-untyped-def]
    return plan_pool(arch, replace(DEPLOYS[engine], **changes))  # type: ignore[arg-type]


def _rows_per_byte_check(p) -> None:  # type: ignore[no-untyped-def]
    page_bytes = p.page_tokens * p.cell.total_bytes
    # cell × rows <= available < cell × (rows + page)
    assert p.rows * p.cell.total_bytes <= p.available_bytes < p.rows * p.cell.total_bytes + page_bytes
    # pools are page-aligned
    assert p.rows % p.page_tokens == 0


@given(engines, weights, dcps, dtypes)
def test_pool_fills_available_to_the_page(engine: str, w: int, dcp: int, dtype: str) -> None:
    p = plan(engine, weights_per_gpu=w, dcp=dcp, kv_cache_dtype=dtype, context_length=131072)
    if p.available_bytes:
        _rows_per_byte_check(p)


@given(engines, flags, st.integers(min_value=0, max_value=77))
def test_gaining_an_indexer_never_grows_capacity(engine: str, f: tuple[bool, ...], layer: int) -> None:
    before = replace(GLM, indexer_full=f)
    after = replace(GLM, indexer_full=tuple(v or i == layer for i, v in enumerate(f)))
    if engine == "vllm":  # vLLM reads the pattern, not indexer_types
        before = replace(before, index_topk_pattern="".join("F" if v else "S" for v in before.indexer_full))
        after = replace(after, index_topk_pattern="".join("F" if v else "S" for v in after.indexer_full))
    assert plan(engine, after).rows <= plan(engine, before).rows


@given(engines, weights, st.integers(min_value=1, max_value=4 * GiB))
def test_less_memory_never_grows_capacity(engine: str, w: int, extra: int) -> None:
    assert plan(engine, weights_per_gpu=w + extra).rows <= plan(engine, weights_per_gpu=w).rows


@given(weights, st.integers(min_value=1, max_value=8 * GiB))
def test_less_pre_load_free_never_grows_sglang_capacity(w: int, less: int) -> None:
    pre = DEPLOYS["sglang"].gpu.cuda_total_bytes - GiB
    a = plan("sglang", weights_per_gpu=w, pre_load_free=pre)
    b = plan("sglang", weights_per_gpu=w, pre_load_free=pre - less)
    assert b.rows <= a.rows


@given(engines, weights, dcps, st.sampled_from([0, 3]))
def test_memory_map_adds_up_to_the_gpu(engine: str, w: int, dcp: int, mtp: int) -> None:
    p = plan(engine, weights_per_gpu=w, dcp=dcp, speculative_num_draft_tokens=mtp, context_length=131072)
    assert sum(s.bytes for s in p.memory_map) == p.deployment.gpu.nvml_total_bytes
    assert all(s.bytes >= 0 for s in p.memory_map if s.label != "reserve")


@given(
    engines,
    st.integers(min_value=1, max_value=200 * GiB),
    st.integers(min_value=0, max_value=4 * GiB),
    st.integers(min_value=1, max_value=300 * GiB),
)
def test_any_gpu_and_weights_plan_or_refuse(engine: str, total: int, driver: int, w: int) -> None:
    """Whatever the GPU and the weights: exit 2 (PlanError) or a plan with nothing negative; never a crash."""
    gpu = replace(DEPLOYS[engine].gpu, key="custom", nvml_total_bytes=total + driver, cuda_total_bytes=total)
    try:
        p = plan(engine, gpu=gpu, weights_per_gpu=w, context_length=131072)
    except PlanError as e:
        assert str(e).startswith("the engine does not start: ")
        return
    assert p.available_bytes >= 0 and p.rows >= 0 and p.usable_pages >= 0 and p.allocated_bytes >= 0
    assert all(s.bytes >= 0 for s in p.memory_map if s.label != "reserve")
    if engine == "sglang":
        assert (p.rows == 0) == (p.startup_error is not None)


@given(
    engines,
    st.integers(min_value=80 * GiB, max_value=135 * GiB),
    st.sampled_from([4096, 131072, 524288, 1 << 20, 2 << 20]),
    dcps,
)
def test_no_startup_error_means_the_engine_starts(engine: str, w: int, ctx: int, dcp: int) -> None:
    """startup_error is None only when the engine's own startup checks pass."""
    p = plan(engine, weights_per_gpu=w, context_length=ctx, dcp=dcp)
    assume(p.startup_error is None)  # the case this is about (hypothesis fails if no draw starts)
    assert p.context_len <= p.arch.max_position_embeddings
    assert p.available_bytes > 0 and p.rows > 0
    if engine == "vllm":  # the max-model-len check, with available − one block
        bpb = p.extras["bytes_per_block"]
        assert bpb * cdiv(cdiv(p.context_len, p.dcp), p.page_tokens) <= p.available_bytes - bpb
