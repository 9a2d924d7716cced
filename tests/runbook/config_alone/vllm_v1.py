"""vLLM V1 (0.9 and later) startup logs reproduced from the config alone (see the package docstring)."""

from __future__ import annotations

from tests.runbook.config_alone import Case

FIELD = "tests/data/logs/field/"
LLAMA = "tests/data/hf/llama-3.1-8b/config.json"
GQA = ("kv_cache_dtype=auto", "page_size=default", "mla_layout=default", "attention_backend=default")
LLMD_0_19 = ("engine=vllm", "engine_version=0.19.0", "gpu=h100", "gpu_memory_utilization=0.95", *GQA)
"""The llm-d-planner accuracy sweep (vLLM 0.19.0 on H100 80GB, utilization 0.95 in every args line)."""

CASES: tuple[Case, ...] = (
    # block = 16 × 2 kv heads per rank × (128 + 128) × 2 B × 32 layers = 524,288 B; available = ceil(81,105 MiB ×
    # 0.95) − weights (config) − non_kv_other (the vLLM profile model; 0.19 budgets no CUDA-graph estimate).
    Case(
        log=FIELD + "vllm-llama-3.1-8b-h100-llmd-planner-tp4.log",
        line="GPU KV cache size: 2,209,792 tokens",
        logged=2_209_792,
        label="vLLM 0.19.0, Llama-3.1-8B bf16, H100 × 4, TP4",
        model=LLAMA,
        sets=(*LLMD_0_19, "gpus_per_node=4", "tp=4", "context_length=8192"),
        stated="non-default args line (max_model_len 8192, gpu_memory_utilization 0.95); tp 4 and H100 80GB "
        "from the sweep's file name",
    ),
    Case(
        log=FIELD + "vllm-llama-3.1-8b-h100-llmd-planner-tp1.log",
        line="GPU KV cache size: 476,016 tokens",
        logged=476_016,
        label="vLLM 0.19.0, Llama-3.1-8B bf16, H100 × 1, TP1",
        model=LLAMA,
        sets=(*LLMD_0_19, "gpus_per_node=1", "tp=1", "context_length=8192"),
        stated="non-default args line; tp 1 and H100 80GB from the sweep's file name",
    ),
)
