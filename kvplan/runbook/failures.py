"""Start-up failures the log prints in words rather than figures. (pure)

A start that dies after its pool lines (an exception during CUDA-graph capture) is a failed start, not "one normal
server start", and vLLM's bare "EngineCore failed to start" is a start that did not come up. The messages, from the
engines' source:

- SGLang: ``Scheduler hit an exception: Traceback ...`` (python/sglang/srt/managers/scheduler.py,
  run_scheduler_process: ``logger.error(f"Scheduler hit an exception: {traceback}")``) and ``Capture cuda graph
  failed`` (python/sglang/srt/model_executor/cuda_graph_runner.py, CudaGraphRunner.__init__).
- vLLM V1: ``WorkerProc hit an exception.`` (vllm/v1/executor/multiproc_executor.py, worker_busy_loop),
  ``EngineCore failed to start.`` (vllm/v1/engine/core.py, run_engine_core) and ``Engine core initialization
  failed`` (vllm/v1/engine/utils.py, wait_for_engine_startup).
"""

from __future__ import annotations

import re

SG_PROFILED = re.compile(r"max_total_tokens=(\d{1,30}) is larger than the profiled value (-?\d{1,30})(?!\d)")
"""SGLang 0.4.x - 0.5.x (python/sglang/srt/model_executor/model_runner.py, init_memory_pool): a --max-total-tokens
above the pool the memory allows; the profiled value is the pool, and at or below 0 SGLang raises 'Not enough
memory. Please try to increase --mem-fraction-static.' next (sglang#7691: 'profiled value -561981' on 8 ranks)."""
SG_FAILED = re.compile(r"Scheduler hit an exception|Capture cuda graph failed")
VL_FAILED = re.compile(r"WorkerProc hit an exception|EngineCore failed to start|Engine core initialization failed")

FAILED_PREFIX = "the start failed"


def failure_message(engine: str, matched: str) -> str:
    """The message a failure line stands for; every one begins with FAILED_PREFIX (see ``is_failure``)."""
    name = "SGLang" if engine == "sglang" else "vLLM"
    return f"{FAILED_PREFIX}: {name} printed '{matched}' (the server did not come up)"


def is_failure(message: str) -> bool:
    """Whether a start-up error is a failure in words (the server died), not a refusal with figures."""
    return message.startswith(FAILED_PREFIX)
