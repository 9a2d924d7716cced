"""vLLM V0 (0.6-0.8) startup logs reproduced from the config alone (see the package docstring).

kvplan/engines/vllm_v0.py: '# GPU blocks' = int((CUDA total × gpu_memory_utilization − non-KV) // block bytes),
non-KV by the sub-range's rule (kvplan/engines/versions.py V0 rows), the profile run estimated from the config.
"""

from __future__ import annotations

from tests.runbook.config_alone import Case

FIELD = "tests/data/logs/field/"
GQA = ("kv_cache_dtype=auto", "page_size=default", "mla_layout=default", "attention_backend=default")
ONE_GPU = ("engine=vllm", "gpus_per_node=1", "tp=1", *GQA)

CASES: tuple[Case, ...] = (
    # 0.6.4: block = 16 × 22 layers × 2 × 4 kv heads × 64 × 2 B = 360,448 B; non-KV = torch allocated peak (weights
    # 2,200,358,912 B from config.json + profile run: sampler 256 × 32,000 × 38 B + hidden (2,048 + 256) × 2,048 × 2 B
    # + cuBLAS 32 MiB = 354,287,616 B) + non-torch (0.16 GiB + CUDA context 500 MiB, ASSUMED: 696,086,691 B)
    # = 3,250,733,219 B; int((150,109,945,856 × 0.9 − non-KV) // 360,448) = 365,789 blocks × 16 = 5,852,624 (+0.07 %).
    Case(
        log=FIELD + "vllm-v0-rho-1b-h200-grpocredit-0.6.4.log",
        line="# GPU blocks: 365549",
        logged=365_549 * 16,
        label="vLLM 0.6.4.post1 (V0), rho-1b (TinyLlama shape) bf16, H200 × 1, TP1",
        model="tests/data/hf/rho-1b/config.json",
        sets=(*ONE_GPU, "engine_version=0.6.4.post1", "gpu=h200", "gpu_memory_utilization=0.9", "context_length=2048"),
        stated="engine config line (v0.6.4.post1, max_seq_len 2048, tp 1); the report's H200; "
        "gpu_memory_utilization 0.9 in configs/base_qwen_math.yaml",
    ),
    # 0.8.1 V0 (LoRA): block = 16 × 32 × 2 × 32 × 128 × 2 B = 8 MiB; non-KV = weights 13,477,879,808 B + profile
    # run (forward 4,096 × (3 × 11,008 + 4 × 4,096) × 2 B + 32 MiB = 438,304,768 B) + non-torch 0.16 GiB:
    # 7,444 blocks vs 7,191 logged (+3.52 %): the log's activation peak is 2.38 GiB.
    Case(
        log=FIELD + "vllm-v0-llama-2-7b-lora-h100-gateway-api-pr-550.log",
        line="# cuda blocks: 7191",
        logged=7_191 * 16,
        label="vLLM 0.8.1 (V0 with LoRA), Llama-2-7b fp16, H100 × 1, TP1",
        model="tests/data/hf/llama-2-7b/config.json",
        sets=(*ONE_GPU, "engine_version=0.8.1", "gpu=h100"),
        stated="deployment args of gpu-deployment.yaml at 731f2445 (Llama-2-7b-hf, tp 1, LoRA); H100 and "
        "utilization 0.90 in the profiling line",
        gap="the log's activation peak is 2.38 GiB; kvplan's V0 estimate is 0.41 GiB (the forward pass of 4,096 "
        "tokens). The run has --enable-lora --max-loras 4 (V0's profile run adds dummy LoRA adapters) and the log "
        "shows torch.compile ran, which the 0.8.0 source turns off for LoRA on V0; neither LoRA's profile path nor a "
        "compiled V0 run is modelled. What would close it: the full log of this pod (its engine config line) and "
        "V0's LoRA profile path read from the 0.8.1 source",
        gap_band=(0.02, 0.05),
    ),
)
