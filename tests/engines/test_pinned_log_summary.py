"""engines/log_summary.py pinned at the boundaries its mutants moved (issue 26): the release each field of a summary
line appeared in, SGLang 0.4.1's request-pool clamp on a small pool, and DP attention where no chunk is printed."""

from __future__ import annotations

from dataclasses import replace

from kvplan.cli._common import load_plan
from kvplan.engines.log_summary import SglangSummary, VllmSummary, VllmV0Summary, engine_summary
from kvplan.render.first_screen import log_lines
from tests.engines.test_engine_log_lines import _vllm


def test_sglang_0_4_1_small_pool_prints_half_its_rows() -> None:
    # SGLang 0.4.1 tp_worker.py TpModelWorker.__init__: max_running_requests = min(max_total_num_tokens // 2 (none
    # set), req_to_token_pool.size); the pool is max_num_reqs + 1 = 2,048 + 1 = 2,049 slots (the 0.4.1 log's 2049
    # for 444,500 rows). A 3,000-token pool: min(3,000 // 2, 2,049) = 1,500
    p = load_plan(None, "glm-5.3-8xh200-sglang", [])
    p = replace(p, engine_version="0.4.1", rows=3_000, logged_tokens=3_000, max_running_requests=2_048)
    s = engine_summary(p)
    assert isinstance(s, SglangSummary) and s.max_running_requests == 1_500
    # a pool of 4,098 tokens: 2,049 either way, the request pool binds
    s = engine_summary(replace(p, rows=4_098, logged_tokens=4_098))
    assert isinstance(s, SglangSummary) and s.max_running_requests == 2_049


def test_sglang_0_4_1_under_dp_attention_prints_no_chunk() -> None:
    # 0.4.1's summary has no chunked_prefill_size field (tests/data/logs/doctor-sglang-0.4.1-llama-3.1-8b-h100-docs-
    # clipping.log line 27), DP attention or not: nothing to divide by dp_size
    p = replace(load_plan(None, "glm-5.3-8xh200-sglang", ["dp_attention=8"]), engine_version="0.4.1")
    s = engine_summary(p)
    assert isinstance(s, SglangSummary) and s.chunked_prefill_size is None


def test_sglang_0_4_3_prints_the_chunk() -> None:
    # shared/logs/sglang-qwq-32b-l4-didier-durand-llms-in-clouds.log (0.4.3.post4): "max_total_num_tokens=46611,
    # chunked_prefill_size=2048, max_prefill_tokens=16384, max_running_requests=2049, context_len=131072"
    p = replace(load_plan(None, "glm-5.3-8xh200-sglang", []), engine_version="0.4.3.post4")
    s = engine_summary(p)
    assert isinstance(s, SglangSummary) and s.chunked_prefill_size == 8_192 and not s.available_mem


def test_vllm_0_27_logs_one_line() -> None:
    # vllm-project/vllm#50462 (update_kv_cache_capacity: one info_once line "GPU KV cache size: N tokens, Maximum
    # concurrency for L tokens per request: Xx") is on main at 22df3a3 by 2026-09-01 (vllm-project/vllm#54662), after
    # 0.26.0's two lines (tests/data/logs/field, 2026-09-04); 0.27.0 is the first release cut after it (ASSUMPTION:
    # log_summary.VLLM_ONE_LINE_SINCE). 11,249 blocks of 64 at 202,752: int(11,249 / 3,168 × 202,752) = 719,936
    p = _vllm("0.27.0", num_blocks=11_249, block=64, max_model_len=202_752)
    s = engine_summary(p)
    assert isinstance(s, VllmSummary) and s.one_line
    assert log_lines(s) == (
        "GPU KV cache size: 719,936 tokens, Maximum concurrency for 202,752 tokens per request: 3.55x",
    )


def test_vllm_v0_0_8_0_names_the_platform() -> None:
    # vLLM executor_base.initialize_cache logs "# %s blocks: %d, # CPU blocks: %d" with current_platform.device_name
    # ('cuda') in v0.8.0; a V0 DeepSeek-R1 log of 03-14 (2025, four days before v0.8.0's release on 2025-03-18) reads
    # "[executor_base.py:111] # cuda blocks: 4739, # CPU blocks: 859"; 0.6.4.post1 still prints "# GPU blocks"
    p = _vllm("0.8.0", num_blocks=4_739, block=64, max_model_len=163_840)
    p = replace(p, startup_error=None, extras={**p.extras, "num_cpu_blocks": 859})
    s = engine_summary(p)
    assert isinstance(s, VllmV0Summary) and s.device == "cuda"
    assert log_lines(s)[0] == "# cuda blocks: 4739, # CPU blocks: 859"


def test_sglang_dp_attention_2_halves_the_chunk() -> None:
    # server_args._handle_data_parallelism: chunked_prefill_size //= dp_size under DP attention, from dp 2:
    # the H200 default 8,192 // 2 = 4,096 in the summary line
    s = engine_summary(load_plan(None, "glm-5.3-8xh200-sglang", ["dp_attention=2"]))
    assert isinstance(s, SglangSummary) and s.chunked_prefill_size == 4_096


# The version boundaries, read in the released wheels (pip download sglang==V / vllm==V --no-deps):
# - SGLang ``managers/tp_worker.py`` TpModelWorker.__init__: max_running_requests = min(max_total_num_tokens // 2,
#   req_to_token_pool.size) in every wheel read (0.4.0 - 0.4.10); ``model_executor/model_runner.py``
#   init_memory_pool builds ReqToTokenPool(size=max_num_reqs + 1) in 0.4.0, 0.4.1, ..., 0.4.6.post5 and
#   ReqToTokenPool(size=max_num_reqs) from 0.4.7; ``managers/scheduler.py``'s summary prints chunked_prefill_size
#   from 0.4.2 (not in 0.4.0, 0.4.1) and available_gpu_mem from 0.4.7 (not in 0.4.4, 0.4.5, 0.4.6, 0.4.6.post5).
# - vLLM V0: "# GPU blocks" in 0.6.6.post1's ``executor/gpu_executor.py``; ``executor/executor_base.py``
#   initialize_cache logs current_platform.dispatch_key ('CUDA': ``platforms/cuda.py`` and ``platforms/rocm.py``)
#   in 0.7.0, 0.7.1 and 0.7.2, current_platform.device_name ('cuda') in 0.7.3 and 0.8.0.
def _sglang_at(version: str) -> SglangSummary:
    # a 3,000-token pool, the plan's default 2,048 requests: min(3,000 // 2, 2,048 + 1) = 1,500 where the pool
    # has the extra slot; 4,098 rows: min(2,049, 2,049) = 2,049 there, the plan's 2,048 elsewhere
    p = load_plan(None, "glm-5.3-8xh200-sglang", [])
    p = replace(p, engine_version=version, rows=4_098, logged_tokens=4_098, max_running_requests=2_048)
    s = engine_summary(p)
    assert isinstance(s, SglangSummary)
    return s


def test_sglang_0_4_0_to_0_4_6_count_the_request_pools_padding_slot() -> None:
    for version in ("0.4.0", "0.4.6", "0.4.6.post5"):
        assert _sglang_at(version).max_running_requests == 2_049, version
    for version in ("0.4.7", "0.4.8"):
        assert _sglang_at(version).max_running_requests == 2_048, version


def test_sglang_prints_the_chunk_from_0_4_2_and_the_free_memory_from_0_4_7() -> None:
    assert _sglang_at("0.4.1").chunked_prefill_size is None
    assert _sglang_at("0.4.2").chunked_prefill_size == 8_192  # the H200 default, as at 0.4.3.post4 above
    assert [_sglang_at(v).available_mem for v in ("0.4.4", "0.4.6.post5", "0.4.7")] == [False, False, True]


def test_vllm_v0_names_gpu_then_the_dispatch_key_then_the_device() -> None:
    def device(version: str) -> str:
        p = _vllm(version, num_blocks=4_739, block=64, max_model_len=163_840)
        s = engine_summary(replace(p, startup_error=None, extras={**p.extras, "num_cpu_blocks": 859}))
        assert isinstance(s, VllmV0Summary)
        return s.device

    got = {v: device(v) for v in ("0.6.6.post1", "0.7.0", "0.7.2", "0.7.3")}
    assert got == {"0.6.6.post1": "GPU", "0.7.0": "CUDA", "0.7.2": "CUDA", "0.7.3": "cuda"}


def test_vllm_v0_logs_the_concurrency_from_0_6_3() -> None:
    # the 0.6.3 wheel's executor/gpu_executor.py initialize_cache: "# GPU blocks: %d, # CPU blocks: %d", then
    # "Maximum concurrency for %s tokens per request: %.2fx" (num_gpu_blocks × block_size / max_model_len); 0.6.2's
    # logs the blocks only. 1,478 blocks of 16 at 29,000: 0.82x
    def lines(version: str) -> tuple[str, ...]:
        p = _vllm(version, num_blocks=1_478, block=16, max_model_len=29_000)
        s = engine_summary(replace(p, startup_error=None, extras={**p.extras, "num_cpu_blocks": 2_048}))
        assert isinstance(s, VllmV0Summary)
        return log_lines(s)

    assert lines("0.6.2") == ("# GPU blocks: 1478, # CPU blocks: 2048",)
    assert lines("0.6.3") == (
        "# GPU blocks: 1478, # CPU blocks: 2048",
        "Maximum concurrency for 29000 tokens per request: 0.82x",
    )
