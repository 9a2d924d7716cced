"""Fuzz: whatever the GPU and the weights, a deployment whose weights do not load is a plan with the verdict
(startup_error, an empty pool), never an exception; and every remedy admit offers for it loads via --set and
admits (issue 12, item 5)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvplan.engines import plan_pool
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model
from kvplan.plan.admit import Request, admit
from kvplan.units import GiB, MiB

GLM = load_model("glm-5.3")
DEPLOYS = {e: load_deployment(f"glm-5.3-8xh200-{e}") for e in ("sglang", "vllm")}


@given(
    st.sampled_from(sorted(DEPLOYS)),
    st.integers(min_value=2 * GiB, max_value=200 * GiB),
    st.integers(min_value=MiB, max_value=300 * GiB),
)
def test_weights_that_do_not_load_are_a_verdict(engine: str, cuda_total: int, weights: int) -> None:
    dep = DEPLOYS[engine]
    gpu = replace(dep.gpu, key="custom", nvml_total_bytes=cuda_total + 512 * MiB, cuda_total_bytes=cuda_total)
    p = plan_pool(GLM, replace(dep, gpu=gpu, weights_per_gpu=weights, context_length=131072))
    # SGLang loads into pre-load free = CUDA total − 1 GiB runtime_overhead; vLLM into the CUDA total
    free = cuda_total - GiB if engine == "sglang" else cuda_total
    loads = free > 0 and weights <= free
    assert p.loads_weights == loads
    if not loads:
        assert p.startup_error is not None and (p.rows, p.available_bytes, p.allocated_bytes) == (0, 0, 0)
        assert all(s.bytes >= 0 for s in p.memory_map if s.label != "reserve")


@pytest.mark.parametrize("gpu", ["h100", "h100-pcie", "h800", "h20"])
@pytest.mark.parametrize("engine", sorted(DEPLOYS))
def test_every_gpu_remedy_loads_via_set_and_admits(engine: str, gpu: str) -> None:
    deploy = f"glm-5.3-8xh200-{engine}"
    req = Request(ctx_tokens=128 * 1024)
    a = admit(plan_pool(GLM, load_deployment(deploy, [f"gpu={gpu}"])), req)
    # the case this is about: GLM-5.3's 94.46 GiB of weights at TP8 do not load on a 80-96 GB GPU, so 128K is
    # rejected and at least one remedy (more GPUs) is offered; an empty list would check nothing
    assert not a.admitted and a.remedies
    for r in a.remedies:
        fixed = plan_pool(GLM, load_deployment(deploy, [f"gpu={gpu}", *r.sets]))
        assert admit(fixed, req, remedies=False).admitted, r.flags
        assert fixed.logged_tokens == r.pool_tokens
