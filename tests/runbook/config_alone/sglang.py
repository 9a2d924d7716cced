"""SGLang startup logs reproduced from the config alone (see the package docstring for the rules)."""

from __future__ import annotations

from tests.runbook.config_alone import Case

FIELD = "tests/data/logs/field/"
LLAMA = "tests/data/hf/llama-3.1-8b/config.json"
GQA = ("kv_cache_dtype=auto", "page_size=default", "mla_layout=default", "attention_backend=default")
"""A non-DSA model gets the engines' own defaults (the built-in default deployment pins GLM-5.3's fp8 MLA cache)."""

CASES: tuple[Case, ...] = (
    # cell = 8 kv heads × (128 + 128) × 2 B × 32 layers = 131,072 B; pre-load free = CUDA total − 1 GiB
    # (kvplan's runtime_overhead default); mfs 0.88 from the 0.4.x tp table; weights from the config.
    Case(
        log=FIELD + "sglang-llama-3.1-8b-h100-sgl-docs-notebook.log",
        line="max_total_num_tokens=444500",
        logged=444_500,
        label="SGLang 0.4.1, Llama-3.1-8B bf16, H100 × 1, TP1",
        model=LLAMA,
        sets=("engine=sglang", "engine_version=0.4.1", "gpu=h100", "gpus_per_node=1", "tp=1", *GQA),
        stated="ServerArgs line (tp_size=1, context_len from the config); the GPU from the docs build (H100 80GB)",
    ),
)
