"""Impossible memory figures never reach the arithmetic (issue 10, engine side).

A custom GPU of 1 B used to divide by zero in SGLang's mem-fraction heuristic (total // MiB = 0): PlanError "the
engine does not start: ..." (exit 2; the loader refuses GPUs under 1 GiB). Weights larger than the memory free
before loading gave a pool plan with a negative reserve, then (issue 10) exit 2; they are a valid deployment the
engine refuses, so since issue 12 the plan carries the verdict: startup_error, an empty pool, exit 1.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from kvplan.engines import plan_pool
from kvplan.errors import InputError, PlanError
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model
from kvplan.units import GiB
from tests.conftest import make_plan

DEPLOYS = ("glm-5.3-8xh200-sglang", "glm-5.3-8xh200-vllm")


@pytest.mark.parametrize("deploy", DEPLOYS)
@pytest.mark.parametrize("total", [1, 1024 * 1024 - 1])
def test_a_gpu_under_one_mib_does_not_start(deploy: str, total: int) -> None:
    dep = load_deployment(deploy)
    tiny = replace(dep.gpu, key="custom", name="tiny", nvml_total_bytes=total, cuda_total_bytes=total)
    with pytest.raises(PlanError, match=r"^the engine does not start: GPU 'tiny' has"):
        plan_pool(load_model("glm-5.3"), replace(dep, gpu=tiny))


def plan(deploy: str, **changes: object):  # type: ignore[no-untyped-def]
    """The engine plan of a preset with fields replaced directly (past the loader's own checks)."""
    return plan_pool(load_model("glm-5.3"), replace(load_deployment(deploy), **changes))  # type: ignore[arg-type]


# SGLang: pre-load free = CUDA total 143,156 MiB − 1 GiB = 142,132 MiB; 142,133 MiB of weights do not load.
# vLLM: 143,500 MiB of weights exceed the CUDA total of 143,156 MiB (both below the NVML total of 143,771 MiB
# that the loader checks): the engine runs out of memory loading them. A valid deployment the engine refuses:
# the verdict (startup_error, exit 1), an empty pool, never PlanError (exit 2, bad input) as before issue 12.
@pytest.mark.parametrize(
    ("deploy", "weights", "free", "label"),
    [
        (DEPLOYS[0], 142_133 * 2**20, 142_132 * 2**20, "pre-load free memory"),
        (DEPLOYS[1], 143_500 * 2**20, 143_156 * 2**20, "CUDA total"),
    ],
)
def test_weights_larger_than_the_memory_do_not_start(deploy: str, weights: int, free: int, label: str) -> None:
    p = plan(deploy, weights_per_gpu=weights)
    assert p.startup_error == (
        f"weights {weights / GiB:.2f} GiB ({weights:,} B) > {free / GiB:.2f} GiB ({free:,} B) {label} on one "
        "NVIDIA H200: loading them runs out of memory"
    )
    assert not p.loads_weights
    assert (p.available_bytes, p.rows, p.usable_pages, p.logged_tokens, p.allocated_bytes) == (0, 0, 0, 0, 0)
    assert all(s.bytes >= 0 for s in p.memory_map)
    assert sum(s.bytes for s in p.memory_map) == p.deployment.gpu.nvml_total_bytes


def test_vllm_weights_that_do_not_load_build_no_pool_even_with_kv_cache_memory() -> None:
    # --kv-cache-memory-bytes skips the utilization budget, but weights above the CUDA total never load: no pool
    # (before: 20 GiB // bytes_per_block blocks planned beside 143,500 MiB of weights on a 143,156 MiB GPU)
    p = plan(DEPLOYS[1], weights_per_gpu=143_500 * 2**20, kv_cache_memory=20 * GiB)
    assert p.startup_error is not None and p.startup_error.startswith("weights 140.14 GiB")
    assert (p.available_bytes, p.rows, p.logged_tokens) == (0, 0, 0)


def test_pre_load_free_of_nothing_does_not_start() -> None:
    # runtime_overhead of the whole CUDA total: pre-load free = 143,156 MiB − 143,156 MiB = 0
    p = plan(DEPLOYS[0], runtime_overhead=143_156 * 2**20)
    assert p.startup_error == "pre-load free memory is 0 B: nothing is left to load the weights into"
    assert not p.loads_weights and p.rows == 0


def test_weights_that_leave_no_kv_budget_build_no_pool() -> None:
    # 130 GiB fit in the 138.8 GiB pre-load free but not beside the slack (138.8 × 0.114 = 15.8 GiB): SGLang starts
    # loading, then refuses to build a pool. No pool rows, and no padding rows or index pages either
    # (before: (0 + 64) rows × 656 × 78 B of MLA "allocated" for a pool that does not exist).
    p = make_plan(weights_per_gpu="130GiB")
    assert p.startup_error is not None and p.rows == 0
    assert p.allocated_bytes == 0
    assert all(s.bytes >= 0 for s in p.memory_map)
    assert sum(s.bytes for s in p.memory_map) == p.deployment.gpu.nvml_total_bytes


def test_a_custom_gpu_of_one_byte_from_a_file_is_bad_input(tmp_path: Path) -> None:
    f = tmp_path / "tiny.yaml"
    f.write_text(
        "schema_version: 1\nmodel: glm-5.3\nengine: sglang\ntp: 1\n"
        "gpu: {name: tiny, nvml_total: 1B, cuda_total: 1B, sm: 90}\n",
        encoding="utf-8",
    )
    with pytest.raises(InputError):  # refused where it is loaded, or by the engine plan: never ZeroDivisionError
        dep = load_deployment(str(f))
        plan_pool(load_model("glm-5.3"), dep)


def test_weights_just_below_the_budget_still_plan() -> None:
    # 100 GiB of weights: 138.80 − 100 − 15.82 = 22.98 GiB of KV budget -> a pool, no error
    p = make_plan(weights_per_gpu="100GiB")
    assert p.startup_error is None and p.rows > 0 and p.available_bytes < 23 * GiB
