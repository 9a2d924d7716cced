"""Fuzz the vLLM V0 plans (issue 12): any V0 version, GPU, model, dtype, tp and memory figures either plan (nothing
negative, '# GPU blocks' × 16 tokens, more memory never fewer blocks) or raise kvplan's own one-line error."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import assume, given
from hypothesis import strategies as st

from kvplan.engines import plan_pool
from kvplan.engines.common import PoolPlan
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model
from kvplan.models.gpus import gpu_catalog
from kvplan.units import GiB
from tests.fuzz.conftest import one_line_error

MODELS = {
    m: load_model(f"tests/data/hf/{m}/config.json")
    for m in ("llama-3.1-8b", "llama-2-7b", "rho-1b", "mixtral-8x7b", "deepseek-v3", "glm-5.3", "qwen3-30b-a3b")
}
BASE = load_deployment(
    None,
    ["model=tests/data/hf/llama-3.1-8b/config.json", "engine=vllm", "engine_version=0.7.3", "gpu=h100", "tp=1",
     "gpus_per_node=1", "kv_cache_dtype=auto", "page_size=default", "mla_layout=default", "attention_backend=default"],
)  # fmt: skip
VERSIONS = ["0.6.0", "0.6.3.post1", "0.6.4.post1", "0.6.5", "0.6.6.post1", "0.7.2", "0.7.3", "0.8.0", "0.8.5.post1"]


def _plan(model: str, **changes: object) -> PoolPlan | None:
    dep = replace(BASE, **changes)  # type: ignore[arg-type]
    return one_line_error(lambda: plan_pool(MODELS[model], dep))  # type: ignore[return-value]


@given(
    st.sampled_from(sorted(MODELS)),
    st.sampled_from(VERSIONS),
    st.sampled_from(sorted(gpu_catalog())),
    st.sampled_from(["auto", "bf16", "fp16", "fp8", "fp8_e5m2", "fp8_ds_mla"]),
    st.sampled_from([1, 2, 4, 8]),
    st.floats(min_value=0.05, max_value=0.99),
    st.one_of(st.none(), st.integers(min_value=1, max_value=1 << 22)),
    st.one_of(st.none(), st.integers(min_value=0, max_value=200 * GiB)),
)
def test_any_v0_deployment_plans_or_says_why(
    model: str, version: str, gpu: str, dtype: str, tp: int, util: float, ctx: int | None, weights: int | None
) -> None:
    changes = {
        "engine_version": version,
        "gpu": gpu_catalog()[gpu],
        "kv_cache_dtype": dtype,
        "tp": tp,
        "gpus_per_node": tp,
        "context_length": ctx,
        "weights_per_gpu": weights,
    }
    p = _plan(model, gpu_memory_utilization=util, **changes)
    assume(p is not None)  # a plan to check (hypothesis fails if every draw is refused)
    assert p is not None
    blocks = p.extras["num_blocks"]
    assert blocks >= 0 and p.available_bytes >= 0
    assert p.logged_tokens == blocks * p.page_tokens
    more = _plan(model, gpu_memory_utilization=min(util + 0.05, 1.0), **changes)
    assert more is not None and more.extras["num_blocks"] >= blocks
