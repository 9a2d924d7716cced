"""The summary lines an engine logs at start-up for a plan, as figures; render/ words them.

SGLang's "Print debug info" line of ``Scheduler.__init__`` (at ``_sglang``), vLLM V1's "GPU KV cache size" and
"Maximum concurrency" lines (at ``_vllm``) and vLLM V0's "# GPU blocks" line (at ``_vllm_v0``), each with the
versions that print each field.
"""

from __future__ import annotations

from kvplan import record
from kvplan.engines.common import PoolPlan
from kvplan.units import cdiv
from kvplan.versions import TOKENS_FROM_CONCURRENCY_SINCE, Version, parse_version, vllm_rules

SGLANG_MAX_PREFILL_TOKENS = 16_384
"""ServerArgs.max_prefill_tokens default (shared/reference/sglang-0.5.23.md §3: ``fields/schedule.py:71``; the
0.4.1 and 0.5.x field logs print 16384)."""

SGLANG_CHUNK_PRINTED_SINCE: Version = (0, 4, 2)
"""0.4.1's summary has no chunked_prefill_size (tests/data/logs/doctor-sglang-0.4.1-llama-3.1-8b-h100-docs-clipping);
the 0.4.2 wheel's ``Scheduler.__init__`` prints ``chunked_prefill_size={server_args.chunked_prefill_size}``."""

SGLANG_AVAILABLE_MEM_SINCE: Version = (0, 4, 7)
"""The summary ends with ``available_gpu_mem={avail_mem:.2f} GB`` from the 0.4.7 wheel's ``Scheduler.__init__``; the
0.4.4, 0.4.5, 0.4.6 and 0.4.6.post5 wheels end it at ``context_len``."""

SGLANG_RUNNING_IS_POOL_SIZE: tuple[Version, Version] = ((0, 4, 0), (0, 4, 7))
"""Releases whose summary prints max_running_requests = min(rows // 2, req_to_token_pool.size), the pool holding
max_num_reqs + 1 slots (tp_worker / model_runner ``ReqToTokenPool(size=max_num_reqs + 1)``): 2049 for a default
2048. Read in the wheels: 0.4.0 (kvplan's oldest SGLang) to 0.4.6.post5 build the pool of max_num_reqs + 1; 0.4.7's
``ModelRunner.init_memory_pool`` builds ``ReqToTokenPool(size=max_num_reqs)``. Seen in 0.4.1
(tests/data/logs/doctor-sglang-0.4.1-llama-3.1-8b-h100-docs-clipping.log: 444,500 rows, 2049) and 0.4.3.post4
(shared/logs/sglang-qwq-32b-l4-didier-durand-llms-in-clouds.log: 46,611 rows, 2049); a July 2025 image prints 2048
(tests/data/logs/field/sglang-llama-3.1-8b-24gb-maxuhl98-thesis.log)."""

VLLM_ONE_LINE_SINCE: Version = (0, 27, 0)
"""vLLM logs the two figures on one line from here: vllm-project/vllm#50462 ("combines the capacity and
maximum-concurrency messages into one startup log line", ``update_kv_cache_capacity``; opened 2026-07-30, on main at
22df3a3 by 2026-09-01, vllm-project/vllm#54662). 0.26.0 still logs two lines (tests/data/logs/field, 2026-09-04),
0.33.0 one (shared/reference/vllm-0.33.0.md §3). ASSUMPTION: 0.27.0, the first release after 0.26.0, has it."""

VLLM_V0_CONCURRENCY_SINCE: Version = (0, 6, 3)
"""V0 logs 'Maximum concurrency' from 0.6.3: the 0.6.3 wheel's ``executor/gpu_executor.py`` initialize_cache logs it
after "# GPU blocks", 0.6.2's does not (runbook/parse/lines.py LineForm 'concurrency')."""

VLLM_V0_DISPATCH_KEY_SINCE: Version = (0, 7, 0)
"""The 0.7.0 wheel's ``executor_base.initialize_cache`` logs "# %s blocks" with ``current_platform.dispatch_key``:
'CUDA' on CUDA and on ROCm (``platforms/rocm.py``); 0.6.6.post1's ``gpu_executor`` still logs "# GPU blocks"."""

VLLM_V0_DEVICE_BLOCKS_SINCE: Version = (0, 7, 3)
"""The 0.7.3 wheel logs ``current_platform.device_name`` there: '# cuda blocks', 'rocm' on AMD (0.7.2: the
dispatch key; runbook/parse/lines.py LineForm 'v0_blocks')."""


@record
class SglangSummary:
    """The figures of SGLang's scheduler summary line."""

    max_total_num_tokens: int
    chunked_prefill_size: int | None
    """None: the version prints no chunked_prefill_size."""
    max_prefill_tokens: int
    max_running_requests: int
    context_len: int
    available_mem: bool
    """The line ends with available_gpu_mem (measured after the pool; kvplan does not predict it)."""


@record
class VllmSummary:
    """The figures of vLLM V1's 'GPU KV cache size' and 'Maximum concurrency' lines."""

    kv_cache_tokens: int
    max_model_len: int
    num_blocks: int
    blocks_per_request: int
    one_line: bool

    @property
    def concurrency_num_den(self) -> tuple[int, int]:
        """Maximum concurrency as num_blocks / blocks per request (render/ divides)."""
        return self.num_blocks, self.blocks_per_request


@record
class VllmV0Summary:
    """The figures of vLLM V0's '# GPU blocks' and 'Maximum concurrency' lines."""

    gpu_blocks: int
    cpu_blocks: int
    device: str
    """'GPU' before 0.8.0, then the platform: 'cuda' ('rocm' on AMD)."""
    block_size: int
    max_model_len: int
    concurrency: bool

    @property
    def concurrency_num_den(self) -> tuple[int, int]:
        return self.gpu_blocks * self.block_size, self.max_model_len


EngineSummary = SglangSummary | VllmSummary | VllmV0Summary


def engine_summary(p: PoolPlan) -> EngineSummary | None:
    """The summary figures the engine would log for this plan; None when it stops before logging them (every
    start-up refusal kvplan plans comes before the summary: SGLang raises before the scheduler is built, vLLM V1's
    max-model-len check runs before the capacity is reported)."""
    if p.startup_error is not None:
        return None
    if p.engine == "sglang":
        return _sglang(p)
    if vllm_rules(p.engine_version).v0_budget:
        return _vllm_v0(p)
    return _vllm(p)


# SGLang, ``managers/scheduler.py`` ``Scheduler.__init__`` ("Print debug info", tp_rank 0):
#     max_total_num_tokens={N}, chunked_prefill_size={C}, max_prefill_tokens={P}, max_running_requests={R},
#     context_len={L}, available_gpu_mem={:.2f} GB
# N is ``logical_max_total_num_tokens`` (rows x dcp), C is ``server_args.chunked_prefill_size`` after
# ``_handle_data_parallelism`` divides it by dp_size under DP attention, P the ServerArgs default 16384. 0.4.1 prints
# no chunked_prefill_size, 0.4.2 on does, 0.4.7 on adds available_gpu_mem (runbook/parse/lines.py LineForm rows).
def _sglang(p: PoolPlan) -> SglangSummary:
    v = parse_version(p.engine_version)
    chunk: int | None = None
    if v >= SGLANG_CHUNK_PRINTED_SINCE:
        chunk = _knob_int(p, "chunked_prefill_size")
        if chunk is not None and p.deployment.dp_attention > 1:
            chunk //= p.deployment.dp_attention  # server_args._handle_data_parallelism: chunked_prefill_size // dp_size
    running = p.max_running_requests
    since, until = SGLANG_RUNNING_IS_POOL_SIZE
    if since <= v < until and _defaulted(p, "max_running_requests"):
        running = min(p.rows // 2, running + 1)  # the request pool's own size, its padding slot counted
    return SglangSummary(
        max_total_num_tokens=p.logged_tokens,
        chunked_prefill_size=chunk,
        max_prefill_tokens=SGLANG_MAX_PREFILL_TOKENS,
        max_running_requests=running,
        context_len=p.context_len,
        available_mem=v >= SGLANG_AVAILABLE_MEM_SINCE,
    )


# vLLM V1, ``v1/core/kv_cache_utils.py``: "GPU KV cache size: {N:,} tokens" and "Maximum concurrency for {L:,}
# tokens per request: {X:.2f}x", X = ``get_max_concurrency_for_kv_cache_config`` = num_blocks (the null block
# included) / blocks one request of max_model_len takes. N = num_blocks // groups x block x dcp up to 0.20.0
# (``_report_kv_cache_config``), int(X x L) from 0.20.1 (``get_kv_cache_capacity``;
# TOKENS_FROM_CONCURRENCY_SINCE).
# Two ``logger.info`` lines (vllm-project/vllm#13596; the 0.24.0 and 0.26.0 field logs); one ``info_once`` line
# "GPU KV cache size: N tokens, Maximum concurrency ..." in ``update_kv_cache_capacity`` (vllm-project/vllm#50462;
# 0.33.0, shared/reference/vllm-0.33.0.md §3).
def _vllm(p: PoolPlan) -> VllmSummary:
    num_blocks = p.extras.get("num_blocks", p.rows // max(p.page_tokens, 1))
    length = p.context_len
    # a hybrid's plan keeps vllm_hybrid's own blocks per request and logged tokens; one group takes
    # cdiv(cdiv(L, dcp), block) blocks (FullAttentionSpec.max_memory_usage_bytes, dcp-sharded)
    per_request = p.extras.get("blocks_per_request") or cdiv(cdiv(length, p.dcp), p.page_tokens)
    tokens = p.logged_tokens
    if not p.pools and parse_version(p.engine_version) >= TOKENS_FROM_CONCURRENCY_SINCE:
        tokens = int(num_blocks / per_request * length)  # get_kv_cache_capacity: int(max_concurrency × max_model_len)
    return VllmSummary(
        kv_cache_tokens=tokens,
        max_model_len=length,
        num_blocks=num_blocks,
        blocks_per_request=per_request,
        one_line=parse_version(p.engine_version) >= VLLM_ONE_LINE_SINCE,
    )


# vLLM V0, ``executor_base.initialize_cache``: "# GPU blocks: N, # CPU blocks: M" ("# CUDA blocks" in 0.7.0-0.7.2,
# "# cuda blocks" from 0.7.3) and,
# from 0.6.3, "Maximum concurrency for {L} tokens per request: {X:.2f}x", X = N x block / L (L unformatted).
def _vllm_v0(p: PoolPlan) -> VllmV0Summary:
    v = parse_version(p.engine_version)
    return VllmV0Summary(
        gpu_blocks=p.extras.get("num_blocks", p.usable_pages),
        cpu_blocks=p.extras.get("num_cpu_blocks", 0),
        device=_v0_device(p, v),
        block_size=p.page_tokens,
        max_model_len=p.context_len,
        concurrency=v >= VLLM_V0_CONCURRENCY_SINCE,
    )


def _v0_device(p: PoolPlan, v: Version) -> str:
    """'GPU' before 0.7.0; the dispatch key 'CUDA' to 0.7.2; from 0.7.3 ``current_platform.device_name``: 'cuda',
    'rocm' on AMD GPUs."""
    if v < VLLM_V0_DISPATCH_KEY_SINCE:
        return "GPU"
    if v < VLLM_V0_DEVICE_BLOCKS_SINCE:
        return "CUDA"
    return "rocm" if p.deployment.gpu.vendor == "amd" else "cuda"


def _defaulted(p: PoolPlan, name: str) -> bool:
    try:
        return p.knob(name).defaulted
    except KeyError:
        return False


def _knob_int(p: PoolPlan, name: str) -> int | None:
    try:
        value = p.knob(name).value
    except KeyError:
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) else None
