"""The doctor on a DeepSeek-VL2 SGLang log: SGLang names the class ``DeepseekVL2ForCausalLM`` (its
``configs/deepseekvl2.py`` sets ``architectures`` so; deepseek-ai's config.json names none), vLLM
``DeepseekVLV2ForCausalLM``; kvplan reads the config as the latter. The log below holds the lines SGLang 0.5.23
prints, with the figures of tests/cli/test_deepseek_vl2_pools.py's plan (H200, TP8, bf16 MLA, page 1):
pre-load free 143,771 MiB = 140.40 GB; weights 7,692,851,328 B (language / 8 + vision replicated + absorbed MLA
copies + rope cache): end 133.24 GB, usage 7.16 GB; 3,449,001 rows of 34,560 B, the pool (rows + 1 page) ×
34,560 = 119,197,509,120 B = 111.01 GB.
"""

from __future__ import annotations

from tests.runbook.conftest import run_doctor

MODEL = "tests/data/hf/deepseek-vl2/config.json"
TS = "[2026-03-01 12:00:00 TP0]"
LOG = "\n".join(
    (
        f"{TS} Load weight begin. avail mem=140.40 GB",
        f"{TS} Load weight end. elapsed=1.00 s, type=DeepseekVL2ForCausalLM, avail mem=133.24 GB, mem usage=7.16 GB.",
        f"{TS} KV Cache is allocated. #tokens: 3449001, KV size: 111.01 GB",
        f"{TS} max_total_num_tokens=3449001, chunked_prefill_size=8192, max_prefill_tokens=16384, "
        "max_running_requests=4096, context_len=4096, available_gpu_mem=20.00 GB",
    )
)


def test_sglangs_class_name_is_the_same_model() -> None:
    # was: kind 'class_differs' (DeepseekVL2ForCausalLM against DeepseekVLV2ForCausalLM), a model alarm
    d = run_doctor(LOG, sets=("engine=sglang", f"model={MODEL}"), model=MODEL)
    assert d.model.log_class == "DeepseekVL2ForCausalLM" and d.model.kind == "ok"
    assert d.headline.kind != "model"
