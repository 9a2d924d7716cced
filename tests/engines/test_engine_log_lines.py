"""The engines' own summary lines for a plan (issue 29 item 2): kvplan.engines.log_summary and their wording in
kvplan.render.first_screen, checked against the engines' format strings and lines real servers printed.

Each case fixes the figures the engine computes from (num_blocks, max_model_len, ...) on a planned PoolPlan with
``dataclasses.replace``, so the arithmetic and the wording are checked apart from the memory plan.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from kvplan.cli._common import load_plan
from kvplan.engines.common import PoolPlan
from kvplan.engines.log_summary import EngineSummary, SglangSummary, VllmSummary, engine_summary
from kvplan.render.first_screen import engine_data, log_lines


def _sglang() -> PoolPlan:
    return load_plan(None, "glm-5.3-8xh200-sglang", [])


def _vllm(version: str, *, num_blocks: int, block: int, max_model_len: int) -> PoolPlan:
    p = load_plan(None, "glm-5.3-8xh200-vllm", [])
    return replace(
        p,
        engine_version=version,
        page_tokens=block,
        rows=num_blocks * block,
        logged_tokens=num_blocks * block,
        usable_pages=num_blocks - 1,
        context_len=max_model_len,
        extras={**p.extras, "num_blocks": num_blocks},
    )


def test_vllm_0_33_logs_one_line_as_the_reference_example() -> None:
    # shared/reference/vllm-0.33.0.md §3 / §8, update_kv_cache_capacity's info_once: "GPU KV cache size: 719,936
    # tokens, Maximum concurrency for 202,752 tokens per request: 3.55x". 202,752 = 3,168 × 64, so the pool is
    # 719,936 / 64 = 11,249 blocks; max_concurrency = 11,249 / cdiv(202,752, 64) = 11,249 / 3,168 = 3.5508;
    # int(3.5508... × 202,752) = 719,936.
    p = _vllm("0.33.0", num_blocks=11_249, block=64, max_model_len=202_752)
    assert log_lines(_summary(p)) == (
        "GPU KV cache size: 719,936 tokens, Maximum concurrency for 202,752 tokens per request: 3.55x",
    )


def test_vllm_0_26_logs_two_lines_as_the_a40_field_log() -> None:
    # tests/data/logs/field/vllm-llama-3.1-8b-a40-vireshkoli-llm-inference-optimization.log (vLLM 0.26.0):
    # "GPU KV cache size: 195,760 tokens" then "Maximum concurrency for 4,096 tokens per request: 47.79x".
    # 195,760 / 16 = 12,235 blocks; 12,235 / cdiv(4,096, 16) = 12,235 / 256 = 47.793; int(47.793 × 4,096) = 195,760.
    p = _vllm("0.26.0", num_blocks=12_235, block=16, max_model_len=4_096)
    assert log_lines(_summary(p)) == (
        "GPU KV cache size: 195,760 tokens",
        "Maximum concurrency for 4,096 tokens per request: 47.79x",
    )


@pytest.mark.parametrize(
    ("version", "tokens"),
    [
        # 0.20.1 on, get_kv_cache_capacity: int(num_blocks / cdiv(L, block) × L) = int(1,000 / 63 × 1,000) = 15,873
        ("0.20.1", 15_873),
        # 0.20.0 and before, _report_kv_cache_config: num_blocks // 1 group × block = 1,000 × 16 = 16,000
        ("0.20.0", 16_000),
    ],
)
def test_vllm_kv_cache_size_is_derived_from_concurrency_from_0_20_1(version: str, tokens: int) -> None:
    # max_model_len 1,000 is not a multiple of the block: one request takes cdiv(1,000, 16) = 63 blocks
    p = _vllm(version, num_blocks=1_000, block=16, max_model_len=1_000)
    s = _summary(p)
    assert isinstance(s, VllmSummary) and s.kv_cache_tokens == tokens
    # Maximum concurrency is num_blocks / blocks per request either way: 1,000 / 63 = 15.873 -> "15.87x"
    assert log_lines(s)[-1] == "Maximum concurrency for 1,000 tokens per request: 15.87x"


def test_vllm_v0_logs_blocks_and_concurrency_as_issue_10517() -> None:
    # tests/data/logs/doctor-vllm-v0-llama-3.1-8b-rtx3090-issue-10517.log (V0 0.6.4.post1): "# GPU blocks: 1478,
    # # CPU blocks: 2048" then "Maximum concurrency for 29000 tokens per request: 0.82x" (executor_base:
    # num_gpu_blocks × block_size / max_model_len = 1,478 × 16 / 29,000 = 0.8154; L printed unformatted)
    p = _vllm("0.6.4", num_blocks=1_478, block=16, max_model_len=29_000)
    p = replace(p, startup_error=None, extras={**p.extras, "num_cpu_blocks": 2_048})
    assert log_lines(_summary(p)) == (
        "# GPU blocks: 1478, # CPU blocks: 2048",
        "Maximum concurrency for 29000 tokens per request: 0.82x",
    )


def test_vllm_v0_0_8_names_the_device() -> None:
    # V0 0.8 prints '# cuda blocks: 7191, # CPU blocks: 512' (runbook/parse/lines.py LineForm 'v0_blocks', a field log)
    p = _vllm("0.8.5", num_blocks=7_191, block=16, max_model_len=4_096)
    p = replace(p, startup_error=None, extras={**p.extras, "num_cpu_blocks": 512})
    assert log_lines(_summary(p))[0] == "# cuda blocks: 7191, # CPU blocks: 512"
    # current_platform.device_name on ROCm: '# rocm blocks' (the same LineForm row)
    amd = replace(p, deployment=replace(p.deployment, gpu=replace(p.deployment.gpu, vendor="amd")))
    assert log_lines(_summary(amd))[0] == "# rocm blocks: 7191, # CPU blocks: 512"


def test_sglang_scheduler_summary_in_its_own_format() -> None:
    # managers/scheduler.py Scheduler.__init__ "Print debug info": plain ints, in this order; chunked_prefill_size
    # 8192 is the H200 default (shared/reference/sglang-0.5.23.md §3 table), max_prefill_tokens the ServerArgs
    # default 16384, available_gpu_mem measured after the pool (not predicted: '?')
    p = _sglang()
    line = log_lines(_summary(p))
    assert line == (
        f"max_total_num_tokens={p.logged_tokens}, chunked_prefill_size=8192, max_prefill_tokens=16384, "
        f"max_running_requests={p.max_running_requests}, context_len={p.context_len}, available_gpu_mem=? GB",
    )


def test_sglang_logs_the_logical_pool_under_dcp() -> None:
    # max_total_num_tokens is logical_max_total_num_tokens = rows S × dcp (shared/reference/sglang-0.5.23.md §6)
    p = load_plan(None, "glm-5.3-8xh200-sglang", ["dcp=8"])
    s = _summary(p)
    assert isinstance(s, SglangSummary) and s.max_total_num_tokens == p.rows * 8


def test_sglang_dp_attention_divides_the_chunk() -> None:
    # server_args._handle_data_parallelism: chunked_prefill_size //= dp_size under DP attention, and the summary
    # prints server_args.chunked_prefill_size: 8192 // 8 = 1024
    s = _summary(load_plan(None, "glm-5.3-8xh200-sglang", ["dp_attention=8"]))
    assert isinstance(s, SglangSummary) and s.chunked_prefill_size == 1_024


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        # tests/data/logs/doctor-sglang-0.4.1-llama-3.1-8b-h100-docs-clipping.log: no chunked_prefill_size, no memory
        ("0.4.1", "max_total_num_tokens=N, max_prefill_tokens=16384, max_running_requests=R, context_len=L"),
        # 0.4.2 adds chunked_prefill_size (runbook/parse/lines.py LineForm 'summary')
        ("0.4.3", "max_total_num_tokens=N, chunked_prefill_size=C, max_prefill_tokens=16384, max_running_requests=R, "
                  "context_len=L"),
        # the 0.4.4 - 0.4.6.post5 wheels' Scheduler.__init__ still end at context_len
        ("0.4.4", "max_total_num_tokens=N, chunked_prefill_size=C, max_prefill_tokens=16384, max_running_requests=R, "
                  "context_len=L"),
        # the 0.4.7 wheel's Scheduler.__init__ ends with f"available_gpu_mem={avail_mem:.2f} GB"
        ("0.4.7", "max_total_num_tokens=N, chunked_prefill_size=C, max_prefill_tokens=16384, max_running_requests=R, "
                  "context_len=L, available_gpu_mem=? GB"),
    ],
)  # fmt: skip
def test_sglang_summary_fields_by_version(version: str, expected: str) -> None:
    p = replace(_sglang(), engine_version=version)
    s = _summary(p)
    assert isinstance(s, SglangSummary)
    (line,) = log_lines(s)
    chunk = p.knob("chunked_prefill_size").value
    shape = (
        line.replace(f"={p.logged_tokens},", "=N,")
        .replace(f"chunked_prefill_size={chunk},", "chunked_prefill_size=C,")
        .replace(f"max_running_requests={s.max_running_requests},", "max_running_requests=R,")
        .replace(f"context_len={p.context_len}", "context_len=L")
    )
    assert shape == expected


def test_no_lines_when_the_engine_does_not_start_and_json_keeps_raw_ints() -> None:
    refused = replace(_sglang(), startup_error="Not enough memory.")
    assert engine_summary(refused) is None
    assert engine_data(refused)["lines"] == []
    data = engine_data(_vllm("0.33.0", num_blocks=11_249, block=64, max_model_len=202_752))
    assert data["figures"]["kv_cache_tokens"] == 719_936 and isinstance(data["figures"]["num_blocks"], int)


def _summary(p: PoolPlan) -> EngineSummary:
    s = engine_summary(p)
    assert s is not None
    return s


def test_sglang_0_4_1_to_0_4_3_print_the_request_pool_size() -> None:
    # 0.4.1-0.4.3: max_running_requests = min(rows // 2, req_to_token_pool.size), the pool of max_num_reqs + 1 =
    # clamp(int(rows / context_len × 512), 2048, 4096) + 1 slots. tests/data/logs/doctor-sglang-0.4.1-llama-3.1-8b-
    # h100-docs-clipping.log line 27 prints, for 444,500 rows at context 131,072 (int(1,736.3) -> 2048; + 1):
    logged = "max_total_num_tokens=444500, max_prefill_tokens=16384, max_running_requests=2049, context_len=131072"
    p = replace(_sglang(), rows=444_500, logged_tokens=444_500, context_len=131_072, max_running_requests=2_048)
    assert log_lines(_summary(replace(p, engine_version="0.4.1"))) == (logged,)
    # shared/logs/sglang-qwq-32b-l4-didier-durand-llms-in-clouds.log (0.4.3.post4): 46,611 rows -> 2049 again
    q = replace(p, engine_version="0.4.3.post4", rows=46_611, logged_tokens=46_611)
    s = _summary(q)
    assert isinstance(s, SglangSummary) and s.max_running_requests == 2_049
    # a July 2025 image (0.4.9.x) prints 2048 for 38,141 rows (tests/data/logs/field/sglang-llama-3.1-8b-24gb-
    # maxuhl98-thesis.log): the plan's own figure
    s = _summary(replace(q, engine_version="0.4.9", rows=38_141, logged_tokens=38_141))
    assert isinstance(s, SglangSummary) and s.max_running_requests == 2_048
