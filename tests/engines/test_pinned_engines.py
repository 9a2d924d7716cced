"""SGLang's capacity table and prefill graph sizes at every boundary (issue 26: constants and comparisons that
no test read). The rows are ``handle_gpu_memory_settings`` of each release (sglang-0.5.23.md §2.6 for 0.5.10+;
``ServerArgs._handle_gpu_memory_settings`` of 0.5.3-0.5.9; ``ServerArgs.__post_init__`` of 0.4.x), in MiB of
nvidia-smi total; each boundary is tried on both sides and at tp 3 / tp 4.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from kvplan.engines import plan_pool
from kvplan.engines.sglang import _capacity_defaults, prefill_graph_batch_sizes
from kvplan.engines.vllm import _defaults_by_memory
from kvplan.errors import PlanError
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model
from tests.conftest import make_plan
from tests.engines.test_engine_versions_sglang import LLAMA, _plan

GI = 1024  # MiB
GIB = 1 << 30


@pytest.mark.parametrize(
    ("mib", "tp", "expected"),
    [
        # 0.5.10+ (memory_hook.py): < 20 Gi: 2048 / 8
        (20 * GI - 1, 1, (2048, 8)),
        # < 35 Gi: 4096 / 48 at tp < 4, 160 from tp 4
        (20 * GI, 3, (4096, 48)),
        (35 * GI - 1, 4, (4096, 160)),
        # < 60 Gi: 4096 / 32, 160
        (35 * GI, 3, (4096, 32)),
        (60 * GI - 1, 4, (4096, 160)),
        # < 90 Gi: 8192 / 256, 512
        (60 * GI, 3, (8192, 256)),
        (90 * GI - 1, 4, (8192, 512)),
        # < 160 Gi (H20, H200): 8192 / 256, 512
        (90 * GI, 3, (8192, 256)),
        (160 * GI - 1, 4, (8192, 512)),
        # else (B200, MI300): 16384 / 512 whatever the tp
        (160 * GI, 1, (16384, 512)),
    ],
)
def test_capacity_table_0_5_10_and_later(mib: int, tp: int, expected: tuple[int, int]) -> None:
    assert _capacity_defaults(mib, tp) == expected


@pytest.mark.parametrize(
    ("mib", "tp", "capacity", "expected"),
    [
        # 0.4.8-0.5.2: < 35 Gi: 2048 / 8 at tp < 4, 80 from tp 4; else 8192 under 160 Gi, 16384 over, max_bs 160
        (35 * GI - 1, 3, "0.4.8", (2048, 8)),
        (35 * GI - 1, 4, "0.4.8", (2048, 80)),
        (160 * GI - 1, 8, "0.4.8", (8192, 160)),
        (160 * GI, 8, "0.4.8", (16384, 160)),
        # 0.4.0-0.4.6: 2048 under 25,000 MiB, else 8192; max_bs 160
        (24_999, 1, "0.4.0", (2048, 160)),
        (25_000, 1, "0.4.0", (8192, 160)),
        # 0.4.7: 16384 over 180,000 MiB (sgl-project/sglang#6718), else 0.4.0's 25,000 MiB split
        (24_999, 1, "0.4.7", (2048, 160)),
        (25_000, 1, "0.4.7", (8192, 160)),
        (180_001, 8, "0.4.7", (16384, 160)),
        (180_000, 8, "0.4.7", (8192, 160)),
        # 0.5.3 / 0.5.5 under 35 Gi (the < 20 Gi row first: 2048 / 8)
        (20 * GI - 1, 1, "0.5.3", (2048, 8)),
        (20 * GI, 3, "0.5.3", (2048, 16)),
        (20 * GI, 3, "0.5.5", (2048, 24)),
        (20 * GI, 4, "0.5.5", (2048, 80)),
    ],
)
def test_capacity_table_of_older_releases(mib: int, tp: int, capacity: str, expected: tuple[int, int]) -> None:
    assert _capacity_defaults(mib, tp, capacity) == expected


def test_prefill_graph_batch_sizes() -> None:
    # cuda_graph_hook.generate_prefill_cuda_graph_batch_sizes: 4..32 step 4 (8), 48..256 step 16 (14),
    # 288..512 step 32 (8), 576..1024 step 64 (8), 1280..4096 step 256 (12), 4608.. step 512 up to max_bs
    full = prefill_graph_batch_sizes(8192)
    assert len(full) == 8 + 14 + 8 + 8 + 12 + 8
    assert full[:9] == (4, 8, 12, 16, 20, 24, 28, 32, 48)
    assert (full[21], full[22], full[29], full[30], full[37], full[38], full[49], full[50], full[-1]) == (
        256, 288, 512, 576, 1024, 1280, 4096, 4608, 8192,
    )  # fmt: skip
    assert prefill_graph_batch_sizes(100) == (4, 8, 12, 16, 20, 24, 28, 32, 48, 64, 80, 96)


def test_reserve_floor_over_60_gib_is_said() -> None:
    # memory_hook.handle_gpu_memory_settings (sglang-0.5.23.md §2.6): reserved = 512 + max(chunk, 2048) × 1.5
    # + tp × pp / 8 × 1024 + the graphs; over 60 GiB, at least 10 × 1024 MiB. GLM-5.3 on 8×H200 with
    # --chunked-prefill-size 1024: 512 + 3,072 + 1,024 + decode graph 512 × 2 + MLA prefill graph 1,536
    # = 7,168 MiB, under the floor: 10,240 MiB, mfs = round((143,771 − 10,240) / 143,771, 3) = 0.929
    p = make_plan(chunked_prefill_size=1024)
    assert p.extras["mem_fraction_reserved_mib"] == 10_240
    k = p.knob("mem_fraction_static")
    assert k.value == 0.929
    assert "MLA prefill graph 1536 + raised to the 10,240 floor over 60 GiB" in k.origin  # the sum is not 10,240


def test_reserve_takes_at_least_a_2048_token_chunk_in_0_5_23() -> None:
    # under 60 GiB there is no floor: Llama-3.1-8B on an L4 (23,034 MiB), tp 1, --chunked-prefill-size 1024:
    # 512 + max(1024, 2048) × 1.5 + 1 / 8 × 1024 + decode graph 48 × 2 + prefill graph of the 38 sizes up to 1,024
    # (8 + 14 + 8 + 8) × 8 = 512 + 3,072 + 128 + 96 + 304 = 4,112 MiB
    p = _plan(LLAMA, "0.5.23", "l4", "weights_per_gpu=15GiB", "pre_load_free=21GiB", "chunked_prefill_size=1024")
    assert p.extras["mem_fraction_reserved_mib"] == 4_112


def test_a_hybrid_that_does_not_load_builds_no_state_pool() -> None:
    # SGLang loads the weights before it profiles memory (ModelRunner.load_model, then init_memory_pool): 139 GiB
    # of weights > the 138.80 GiB pre-load free of an H200: it never gets to the Mamba pool, no state slot is sized
    p = make_plan(model="qwen3-next-80b-a3b", context_length="128K", page_size="default", weights_per_gpu="139GiB")
    assert p.startup_error is not None and not p.loads_weights
    assert p.extras["max_mamba_cache_size"] == 0


@pytest.mark.parametrize(
    ("cuda_total", "name", "expected"),
    [
        # vllm engine/arg_utils.py (vllm-0.33.0.md §6) under `vllm serve`, by the device memory torch reports:
        (160 * GIB, "NVIDIA B200", (16_384, 1_024)),  # >= 160 GiB
        (160 * GIB - 1, "NVIDIA H200", (8_192, 1_024)),  # >= 70 GiB, not A100 / GB10
        (70 * GIB, "NVIDIA H100 80GB HBM3", (8_192, 1_024)),
        (70 * GIB - 1, "NVIDIA H100 80GB HBM3", (2_048, 256)),  # under 70 GiB: the small row
        (80 * GIB, "NVIDIA A100-SXM4-80GB", (2_048, 256)),  # an A100 stays in the small row
        (120 * GIB, "NVIDIA GB10", (2_048, 256)),  # and so does GB10
    ],
)
def test_vllm_batch_defaults_at_their_boundaries(cuda_total: int, name: str, expected: tuple[int, int]) -> None:
    dep = load_deployment("glm-5.3-8xh200-vllm")
    gpu = replace(dep.gpu, name=name, cuda_total_bytes=cuda_total)
    assert _defaults_by_memory(replace(dep, gpu=gpu)) == expected


@pytest.mark.parametrize(
    ("max_model_len", "buffer"),
    [
        # vllm indexer.py (reference §6): max_model_len × (576 × 2 // 132 = 8) entries × factor of 132 B, the
        # sparse prefill workspace factor 5 up to 256K (config/attention.py), 2 above
        (262_144, 262_144 * 8 * 5 * 132),  # 1,384,120,320 B
        (262_145, 262_145 * 8 * 2 * 132),  # 553,650,240 B
    ],
)
def test_vllm_indexer_prefill_buffer_factor_at_256k(max_model_len: int, buffer: int) -> None:
    p = make_plan("glm-5.3-8xh200-vllm", context_length=max_model_len)
    assert next(t.bytes for t in p.chain if t.label == "indexer prefill buffer") == buffer


def test_vllm_mtp_draft_rows_in_the_memory_map() -> None:
    # GLM-5.3 with MTP (3 draft tokens): every block also holds the MTP layer's MLA row and indexer key,
    # 656 + 132 = 788 B a token, so a token is 54,728 B and a block 3,502,592 B (reference §7 "With MTP").
    # 28,330,388,925 B available // 3,502,592 = 8,088 blocks = 517,632 rows; the draft layer's share of the
    # pool: 517,632 × 788 = 407,894,016 B
    p = make_plan("glm-5.3-8xh200-vllm", speculative_num_draft_tokens=3)
    assert next(t.bytes for t in p.chain if t.label == "available KV cache memory") == 28_330_388_925
    assert p.rows == 517_632
    assert next(s.bytes for s in p.memory_map if s.label == "draft") == 407_894_016
    assert p.kv_dtype == "fp8"  # the --kv-cache-dtype knob, not the backend named beside it


@pytest.mark.parametrize(("gpu", "backend"), [("b200", "FLASHINFER"), ("h200", "FLASH_ATTN")])
def test_vllm_mha_backend_by_sm(gpu: str, backend: str) -> None:
    # vllm platforms/cuda.py _get_backend_priorities (non-MLA): FLASHINFER first on SM10x, else FLASH_ATTN;
    # both take CacheConfig's default block size 16
    p = make_plan("glm-5.3-8xh200-vllm", model="llama-3.1-8b", tp=1, gpu=gpu, context_length=8192)
    assert (p.knob("attention_backend").value, p.page_tokens) == (backend, 16)


def test_vllm_eager_without_a_profile_says_the_graph_estimate() -> None:
    # a config with no hidden / vocab size (no activation profile): the non-KV figure is the recipe calibration
    # less the assumed CUDA-graph share under --enforce-eager, 1,696,595,968 B = 1,618 MiB
    arch = replace(load_model("glm-5.3"), activation=None)
    k = make_plan("glm-5.3-8xh200-vllm", model=arch, disable_cuda_graph="true").knob("non_kv_other")
    assert "less the assumed CUDA-graph estimate 1,618 MiB (--enforce-eager: no CUDA graphs)" in k.origin


def test_vllm_hybrid_with_no_block_logs_no_tokens() -> None:
    # --kv-cache-memory 1 MiB holds not one Qwen3-Next block (a 320-token block of every group): 0 blocks, so
    # vLLM logs no "GPU KV cache size" and refuses to start; the pool holds nothing
    p = make_plan("glm-5.3-8xh200-vllm", model="qwen3-next-80b-a3b", context_length="128K", page_size="default",
                  kv_cache_memory="1MiB")  # fmt: skip
    assert p.startup_error is not None
    assert (p.logged_tokens, p.pools[0].capacity) == (0, 0)


def test_sglang_refuses_dsa_dcp_with_an_index_kpool_of_2(tmp_path: Path) -> None:
    # SGLang's DSA decode context parallel needs index_kpool 1 (the pooled indexer keys are not sharded by token):
    # DeepSeek-V3.2's config with index_kpool 2 at --dcp-size 2 is refused, at the smallest kpool past 1
    config = json.loads(Path("tests/data/hf/deepseek-v3.2/config.json").read_text())
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**config, "index_kpool": 2}))
    dep = load_deployment(None, [f"model={path}", "engine=sglang", "gpu=h200", "gpus_per_node=8", "tp=8", "dcp=2"])
    with pytest.raises(PlanError, match="SGLang rejects --dcp-size 2 with index_kpool 2"):
        plan_pool(load_model(str(path)), dep)
