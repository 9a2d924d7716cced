"""vLLM V0 (0.6-0.8) startup logs reproduced from the config alone (see the package docstring).

kvplan/engines/vllm_v0.py: '# GPU blocks' = int((CUDA total × gpu_memory_utilization − non-KV) // block bytes),
non-KV by the sub-range's rule (kvplan/versions.py V0 rows), the profile run estimated from the config.
"""

from __future__ import annotations

from tests.runbook.config_alone import Case

FIELD = "tests/data/logs/field/"
LLAMA3 = "tests/data/hf/llama-3.1-8b/config.json"
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
    # run (forward 4,096 × (3 × 11,008 + 3 × 4,096) × 2 B + 32 MiB = 404,750,336 B) + non-torch 0.16 GiB:
    # 7,448 blocks vs 7,191 logged (+3.57 %): the log's activation peak is 2.38 GiB.
    Case(
        log=FIELD + "vllm-v0-llama-2-7b-lora-h100-gateway-api-pr-550.log",
        line="# cuda blocks: 7191",
        logged=7_191 * 16,
        label="vLLM 0.8.1 (V0 with LoRA), Llama-2-7b fp16, H100 × 1, TP1",
        model="tests/data/hf/llama-2-7b/config.json",
        sets=(*ONE_GPU, "engine_version=0.8.1", "gpu=h100"),
        stated="deployment args of gpu-deployment.yaml at 731f2445 (Llama-2-7b-hf, tp 1, LoRA); H100 and "
        "utilization 0.90 in the profiling line",
        gap="the log's activation peak is 2.38 GiB; kvplan's V0 estimate is 0.38 GiB (the forward pass of 4,096 "
        "tokens). The run has --enable-lora --max-loras 4 (V0's profile run adds dummy LoRA adapters) and the log "
        "shows torch.compile ran, which the 0.8.0 source turns off for LoRA on V0; neither LoRA's profile path nor a "
        "compiled V0 run is modelled. What would close it: the full log of this pod (its engine config line) and "
        "V0's LoRA profile path read from the 0.8.1 source",
        gap_band=(0.02, 0.05),
    ),
    # 0.6.4 on an RTX 3090, Llama-3.1-8B, --max-model-len 20000 (run 1 of the comment): block 2 MiB; non-KV =
    # weights 16,094,076,928 B + profile run (forward 20,000 × (3 × 14,336 + 3 × 4,096) × 2 B + 32 MiB =
    # 2,245,394,432 B) + non-torch 0.16 GiB + CUDA context 500 MiB; the catalog's CUDA total 23.50 GiB: 1,751 blocks
    # × 16 = 28,016 vs 31,232 logged (-10.3 %).
    Case(
        log="tests/data/logs/doctor-vllm-v0-llama-3.1-8b-rtx3090-issue-10517.log",
        line="GPU blocks: 1952, # CPU blocks: 2048",
        logged=1_952 * 16,
        label="vLLM 0.6.4 (V0), Llama-3.1-8B bf16, RTX 3090 × 1, TP1, max_model_len 20000",
        model=LLAMA3,
        sets=(*ONE_GPU, "engine_version=0.6.4", "gpu=rtx-3090", "gpu_memory_utilization=0.9", "context_length=20000"),
        stated="the comment's 'GPU: RTX 3090' and '20k' run; 0.6.4 from its one-line 'Memory profiling results' "
        "(vllm-project/vllm#9352), utilization 0.90 in that line",
        gap="a 24 GB card leaves 3.81 GiB of KV, so 0.4 GiB is 10 %: the catalog's RTX 3090 CUDA total is derived "
        "(NVML − 512 MiB = 23.50 GiB; the log reads 23.58 GiB) and kvplan's 0.6.4 non-torch assumption (0.16 GiB + "
        "a 500 MiB CUDA context, H100-class) is 0.65 GiB where this card logs 0.35 GiB. What would close it: the "
        "measured RTX 3090 CUDA total in the catalog and a per-GPU CUDA-context figure",
        gap_band=(-0.15, -0.05),
    ),
    # The same comment's 29k run (--max-model-len 29000), refused at start-up: its refusal prints the pool,
    # 23,648 tokens = 1,478 blocks × 16. kvplan: the profile run now holds 29,000 tokens (forward 29,000 ×
    # (3 × 14,336 + 3 × 4,096) × 2 B + 32 MiB = 3,240,722,432 B), the rest as at 20k: requested 22,709,639,577 −
    # weights 16,094,076,928 − 3,240,722,432 − non-torch 696,086,691 = 2,678,753,526 B // 2 MiB = 1,277 blocks
    # × 16 = 20,432 (−13.60 %).
    Case(
        log="tests/data/logs/doctor-vllm-v0-llama-3.1-8b-rtx3090-issue-10517.log",
        line="maximum number of tokens that can be stored in KV cache (23648)",
        logged=1_478 * 16,
        label="vLLM 0.6.4 (V0), Llama-3.1-8B bf16, RTX 3090 × 1, TP1, max_model_len 29000 (refused)",
        model=LLAMA3,
        sets=(*ONE_GPU, "engine_version=0.6.4", "gpu=rtx-3090", "gpu_memory_utilization=0.9", "context_length=29000"),
        stated="the comment's 'GPU: RTX 3090' and '29k - BAD' run; 0.6.4 from its one-line 'Memory profiling results', "
        "utilization 0.90 in that line",
        gap="a 24 GB card leaves 2.89 GiB of KV at 29k, so a 0.3 GiB error is a tenth of it, as at 20k: the "
        "catalog's derived RTX 3090 CUDA total (23.50 GiB; the log reads 23.58) and kvplan's 0.65 GiB non-torch "
        "assumption (the log: 0.35 GiB); the profile run's 2.64 GiB over the weights (17.98 − 15.34 GiB logged) is "
        "planned as 3.02 GiB. What would close it: the measured RTX 3090 CUDA total and a per-GPU CUDA-context figure",
        gap_band=(-0.16, -0.11),
    ),
)
