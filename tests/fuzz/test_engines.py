"""Fuzz the engine plans (issue 10, engine side): any backend text, GPU, dtype and memory figures either plan
(nothing negative) or raise kvplan's InputError/PlanError (exit 2); never another exception."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from kvplan.engines import plan_pool
from kvplan.engines.backends import SGLANG, VLLM
from kvplan.errors import InputError
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model
from kvplan.models.gpus import gpu_catalog
from kvplan.units import GiB

GLM = load_model("glm-5.3")
DEPLOYS = {e: load_deployment(f"glm-5.3-8xh200-{e}") for e in ("sglang", "vllm")}
NAMES = sorted({b.name for b in SGLANG + VLLM})

backends = st.one_of(
    st.none(),
    st.sampled_from(NAMES),
    st.tuples(st.sampled_from(NAMES), st.sampled_from(NAMES)).map("/".join),
    st.text(min_size=1, max_size=20),
)


@given(
    st.sampled_from(sorted(DEPLOYS)),
    st.sampled_from(sorted(gpu_catalog())),
    st.sampled_from(["auto", "bf16", "fp8", "fp8_e4m3", "fp8_ds_mla"]),
    backends,
    st.integers(min_value=1, max_value=8),
    st.integers(min_value=0, max_value=200 * GiB),
)
def test_any_backend_gpu_and_weights(engine: str, gpu: str, dtype: str, backend: str | None, dcp: int, w: int) -> None:
    dep = replace(
        DEPLOYS[engine],
        gpu=gpu_catalog()[gpu],
        kv_cache_dtype=dtype,
        attention_backend=backend,
        dcp=dcp if 8 % dcp == 0 else 1,
        weights_per_gpu=w or None,
    )
    try:
        p = plan_pool(GLM, dep)
    except InputError as e:
        assert str(e) and "\n" not in str(e)
        return
    assert p.rows >= 0 and p.available_bytes >= 0 and p.usable_pages >= 0 and p.allocated_bytes >= 0
    assert p.cell.total_bytes > 0
