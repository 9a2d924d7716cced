"""Survivors of the sampled mutation check (scripts/mutate.py, issue 26) on kvplan/engines/vllm_profile.py: the
multiprocessor count per GPU that sizes vLLM's Triton top-k/top-p buffer, read back through the buffer and checked
against the vendors' datasheets."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kvplan.engines.vllm_profile import non_torch_bytes, profile_peak
from kvplan.models.activation import activation_dims
from kvplan.models.deployment import load_deployment
from kvplan.units import GiB

DATASHEET_SMS = {
    # NVIDIA H100 / H800 / H200 / GH200 datasheets: 132 SMs (SXM5, NVL), 114 (PCIe)
    "h100-sxm": 132, "h100-nvl": 132, "h100-pcie": 114, "h200": 132, "h200-nvl": 132, "h800": 132,
    "gh200-96gb": 132, "gh200-144gb": 132,
    # H20 (78 SMs), B200 (148 SMs), A100 / A800 (108), L4 (58), L40 / L40S (142), RTX 6000 Ada (142)
    "h20": 78, "h20-3e": 78, "b200": 148, "a100-80gb": 108, "a100-80gb-pcie": 108, "a100-40gb": 108,
    "a800-80gb": 108, "a800-80gb-pcie": 108, "l4": 58, "l40": 142, "l40s": 142, "rtx-6000-ada": 142,
    # GeForce RTX 3090 (82), 4090 (128), 5090 (170); RTX PRO 6000 Blackwell (188); GB10 / DGX Spark (48)
    "rtx-3090": 82, "rtx-4090": 128, "rtx-5090": 170, "rtx-pro-6000": 188, "gb10": 48,
    # A40 datasheet: 10,752 CUDA cores on GA102, 128 a multiprocessor -> 84
    "a40": 84,
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


def test_an_unknown_gpu_is_assumed_132_multiprocessors() -> None:
    # SM_COUNT's docstring: "Unknown GPU: 132 (ASSUMED)", an H100 SXM's count; 1,024 requests -> one row an SM
    dims = activation_dims({"hidden_size": 4096, "vocab_size": 128256, "intermediate_size": 14336})
    assert dims is not None
    dep = load_deployment(None, ["model=llama-3.1-8b", "engine=vllm", "gpu=h100", "tp=1", "gpus_per_node=1"])
    gpu = replace(dep.gpu, key="my-own-gpu")
    p = profile_peak(dims, gpu=gpu, tp=1, ep=1, max_num_batched_tokens=8192, max_num_seqs=1024)
    assert p.topk_topp_buffer_bytes == 132 * 128_256 * 4


@pytest.mark.parametrize(("dtype", "per_logit"), [("bfloat16", 14), ("float32", 12)])
def test_flashinfer_sampler_before_0_11_1_holds_14_bytes_a_logit(dtype: str, per_logit: int) -> None:
    # Before 0.11.1 (vllm-project/vllm#26859 made it opt-in) V1 samples with FlashInfer on CUDA: the bf16 logits 2,
    # the Sampler's float32 copy 4, top_k_mask_logits' float32 output 4 and its float32 softmax 4 = 14 B a logit
    # (flashinfer sampling.py top_p_sampling_from_probs: no sort); float32 logits are their own copy: 4 + 4 + 4 = 12
    dims = activation_dims({"hidden_size": 64, "vocab_size": 1000, "torch_dtype": dtype})
    assert dims is not None
    dep = load_deployment(None, ["model=llama-3.1-8b", "engine=vllm", "gpu=h100", "tp=1", "gpus_per_node=1"])
    p = profile_peak(dims, gpu=dep.gpu, tp=1, ep=1, max_num_batched_tokens=16, max_num_seqs=16, version=(0, 10, 1))
    assert (p.sampler_path, p.sampler_bytes, p.topk_topp_buffer_bytes) == ("FlashInfer", 16 * 1000 * per_logit, 0)


def test_custom_all_reduce_is_off_past_two_pcie_only_gpus() -> None:
    # custom_all_reduce.py CustomAllreduce.__init__: "if world_size > 2 and not fully_connected" -> disabled ('not
    # supported on more than two PCIe-only GPUs'): tp 3 without NVLink keeps the TP1 growth, 0.250 GiB; tp 2 over
    # PCIe still builds it: the TP2 figure, 2.070 GiB
    assert non_torch_bytes(3, pcie_only=True)[0] == 250 * GiB // 1000
    assert non_torch_bytes(2, pcie_only=True)[0] == 2070 * GiB // 1000


def test_tp4_non_torch_is_the_fitted_tp4_figure_not_an_assumption() -> None:
    # NON_TORCH_TP_WIDE: fitted on three TP4 logs (2.13 / 2.17 / 2.21 GiB); only tp > 4 is assumed
    assert non_torch_bytes(4) == (2170 * GiB // 1000, "FITTED on vLLM 0.19.0 H100 TP4 logs (tp 4)")
    assert non_torch_bytes(8) == (2170 * GiB // 1000, "FITTED on TP4 logs, ASSUMED for tp 8")


def test_every_catalog_gpu_has_its_datasheet_count() -> None:
    # a catalog GPU without a row takes the assumed 132 SMs (the A40 did: 132 rows of its top-k buffer for 84);
    # B300, GB200 and GB300 have rows without a datasheet figure pinned here (README's vllm_profile row)
    from kvplan.engines.vllm_profile import SM_COUNT
    from kvplan.models.gpus import gpu_catalog

    assert set(gpu_catalog()) <= set(SM_COUNT)
    assert set(DATASHEET_SMS) | {"b300", "gb200", "gb300"} == set(SM_COUNT)
