"""Survivors of the sampled mutation check (scripts/mutate.py, issue 26) on kvplan/engines/vllm_profile.py: the
multiprocessor count per GPU that sizes vLLM's Triton top-k/top-p buffer, read back through the buffer and checked
against the vendors' datasheets."""

from __future__ import annotations

import pytest

from kvplan.engines.vllm_profile import profile_peak
from kvplan.models.activation import activation_dims
from kvplan.models.deployment import load_deployment

DATASHEET_SMS = {
    # NVIDIA H100 / H800 / H200 / GH200 datasheets: 132 SMs (SXM5, NVL), 114 (PCIe)
    "h100-sxm": 132, "h100-nvl": 132, "h100-pcie": 114, "h200": 132, "h200-nvl": 132, "h800": 132,
    "gh200-96gb": 132, "gh200-144gb": 132,
    # H20 (78 SMs), B200 (148 SMs), A100 / A800 (108), L4 (58), L40 / L40S (142), RTX 6000 Ada (142)
    "h20": 78, "h20-3e": 78, "b200": 148, "a100-80gb": 108, "a100-80gb-pcie": 108, "a100-40gb": 108,
    "a800-80gb": 108, "a800-80gb-pcie": 108, "l4": 58, "l40": 142, "l40s": 142, "rtx-6000-ada": 142,
    # GeForce RTX 3090 (82), 4090 (128), 5090 (170); RTX PRO 6000 Blackwell (188); GB10 / DGX Spark (48)
    "rtx-3090": 82, "rtx-4090": 128, "rtx-5090": 170, "rtx-pro-6000": 188, "gb10": 48,
    # AMD Instinct compute units: MI300X / MI325X 304, MI355X 256, MI308X 80; MI250X 220 across its two GCDs,
    # and kvplan's mi250x is one GCD (gpus.yaml: 'an MI250X shows as two 64 GiB GPUs'), so 110 for the device
    # vLLM runs on (torch multi_processor_count)
    "mi300x": 304, "mi325x": 304, "mi355x": 256, "mi308x": 80, "mi250x": 110,
}  # fmt: skip


@pytest.mark.parametrize("gpu", sorted(DATASHEET_SMS))
def test_the_topk_buffer_has_a_row_per_multiprocessor(gpu: str) -> None:
    # sampler/ops/topk_topp_triton.py: min(SMs, requests) programs, a float32 [min(next_power_of_2(programs), SMs),
    # vocab] buffer; with 1,024 requests (more than any GPU's SMs) that is one row per SM: rows = buffer / (vocab × 4)
    dims = activation_dims({"hidden_size": 4096, "vocab_size": 128256, "intermediate_size": 14336})
    assert dims is not None
    dep = load_deployment(None, ["model=llama-3.1-8b", "engine=vllm", f"gpu={gpu}", "tp=1", "gpus_per_node=1"])
    p = profile_peak(dims, gpu=dep.gpu, tp=1, ep=1, max_num_batched_tokens=8192, max_num_seqs=1024)
    assert p.topk_topp_buffer_bytes == DATASHEET_SMS[gpu] * 128_256 * 4


def test_a_float32_model_before_0_17_sorts_36_bytes_a_logit() -> None:
    # 0.16.0 apply_top_k_top_p at logits.sort: bf16 logits 2 + their float32 copy 4 + sorted values 4 + int64
    # indices 8 + torch.sort's 20 = 38 B. A float32 model's logits are already float32 (the copy is the tensor
    # itself, 4 B): 4 + 4 + 8 + 20 = 36 B, as the Triton path's 2 + 4 + 4 + 4 = 14 becomes 4 + 4 + 4 = 12
    dims = activation_dims({"hidden_size": 64, "vocab_size": 1000, "torch_dtype": "float32"})
    assert dims is not None and dims.dtype_bytes == 4
    dep = load_deployment(None, ["model=llama-3.1-8b", "engine=vllm", "gpu=h100", "tp=1", "gpus_per_node=1"])
    p = profile_peak(dims, gpu=dep.gpu, tp=1, ep=1, max_num_batched_tokens=16, max_num_seqs=16, version=(0, 16, 0))
    assert p.sampler_bytes == 16 * 1000 * 36
