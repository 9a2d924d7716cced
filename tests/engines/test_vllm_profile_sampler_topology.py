"""vLLM V1's profile run before 0.11.1 (FlashInfer sampling, no sort) and a TP group spread over nodes (no custom
all-reduce, no NVLS): the two terms issue 28 found in the gpt-oss-120b 4 × A100 log of dennislee22/vLLM-benchmarking
(tests/data/logs/field/vllm-hybrid-gpt-oss-120b-a100-tp4-dennislee22-vllm-benchmarking.log)."""

from __future__ import annotations

import pytest

from kvplan.engines.vllm_profile import non_torch_bytes, profile_peak
from kvplan.models.activation import ActivationDims
from kvplan.models.deployment import load_deployment
from kvplan.units import GiB

# gpt-oss-120b: hidden 2,880, vocab 201,088; its MXFP4 experts run the monolithic kernel (no workspace)
GPT_OSS = ActivationDims(hidden_size=2880, vocab_size=201088, dense_intermediate=0, expert_intermediate=0,
                         experts_per_token=0)  # fmt: skip


def _gpu(key: str):  # type: ignore[no-untyped-def]
    return load_deployment(None, ["model=llama-3.1-8b", "engine=vllm", f"gpu={key}", "tp=1", "gpus_per_node=1"]).gpu


def test_before_0_11_1_flashinfer_samples_14_bytes_a_logit() -> None:
    # vLLM 0.10.1.1 v1/sample/ops/topk_topp_sampler.py: 'Using FlashInfer for top-p & top-k sampling' (printed by the
    # log), forward_cuda -> flashinfer_sample -> top_k_top_p_sampling_from_logits: live at the peak the bf16 logits
    # (2), the Sampler's float32 copy (4), top_k_mask_logits' float32 output (4) and its softmax (4) = 14 B, no sort
    # and no cached buffer. The A100 API-server defaults: 2,048 batched tokens, 256 sequences. 256 × 201,088 × 14 =
    # 720,699,392 B; kept hidden states (2,048 + 2 × 256) × 2,880 × 2 = 14,745,600 B; cuBLAS 33,554,432 B.
    p = profile_peak(GPT_OSS, gpu=_gpu("a100"), tp=4, ep=1, max_num_batched_tokens=2048, max_num_seqs=256,
                     version=(0, 10, 1))  # fmt: skip
    assert (p.sampler_path, p.sampler_bytes, p.topk_topp_buffer_bytes) == ("FlashInfer", 720_699_392, 0)
    assert p.torch_peak_bytes == 720_699_392 + 14_745_600 + 33_554_432 == 768_999_424


@pytest.mark.parametrize(
    ("version", "gpu", "path", "per_logit"),
    [
        ((0, 11, 0), "h100", "FlashInfer", 14),  # the last release before vllm#26859
        ((0, 11, 1), "h100", "sort", 38),  # vllm#26859 'Disable FlashInfer sampler by default' (2025-10-15)
        ((0, 10, 1), "mi300x", "sort", 38),  # ROCm has no FlashInfer: PyTorch's sort
        ((0, 17, 0), "h100", "Triton top-k/top-p", 14),  # TRITON_TOPK_TOPP_SINCE
    ],
)
def test_the_sampler_by_release_and_platform(version: tuple[int, ...], gpu: str, path: str, per_logit: int) -> None:
    p = profile_peak(GPT_OSS, gpu=_gpu(gpu), tp=1, ep=1, max_num_batched_tokens=16, max_num_seqs=16, version=version)
    assert (p.sampler_path, p.sampler_bytes) == (path, 16 * 201_088 * per_logit)


def test_a_tp_group_across_nodes_keeps_the_tp1_growth() -> None:
    # custom_all_reduce.py CustomAllreduce.__init__ returns early ('Custom allreduce is disabled because this process
    # group spans across nodes', printed by the gpt-oss log on every rank) and NVLS needs one node's NVSwitch: the
    # TP1 figure, 130 × 2^30 // 1000 = 139,586,437 B before 0.18, 268,435,456 B from 0.18; within a node TP4 keeps
    # the 2.17 GiB fitted on H100 TP4 logs, 2,170 × 2^30 // 1000 = 2,330,019,758 B
    assert non_torch_bytes(4, (0, 10, 1), across_nodes=True)[0] == 139_586_437
    assert non_torch_bytes(8, (0, 19, 0), across_nodes=True)[0] == 268_435_456
    assert non_torch_bytes(4, (0, 10, 1))[0] == 2_330_019_758 == 2170 * GiB // 1000
    assert non_torch_bytes(1, (0, 10, 1), across_nodes=True) == non_torch_bytes(1, (0, 10, 1))


def test_the_plan_places_tp_across_nodes_from_gpus_per_node() -> None:
    # the gpt-oss case as its log states it (one GPU a node, TP4): non-torch growth is the TP1 figure
    from tests.runbook.config_alone import all_cases, plan

    case = next(c for c in all_cases() if "gpt-oss-120b" in c.label and "A100" in c.label)
    p = plan(case)
    assert p.deployment.gpus_per_node == 1 and p.deployment.tp == 4
    assert next(t.bytes for t in p.chain if t.label == "non-torch growth") == 139_586_437


@pytest.mark.parametrize(
    ("version", "knob", "path", "per_logit"),
    [
        # an install without FlashInfer (topk_topp_sampler.py: 'FlashInfer is not available. Falling back to the
        # PyTorch-native implementation'), or VLLM_USE_FLASHINFER_SAMPLER=0: apply_top_k_top_p sorts, 38 B a logit
        ((0, 9, 2), False, "sort", 38),
        # VLLM_USE_FLASHINFER_SAMPLER=1 after vllm#26859 made FlashInfer opt-in: 14 B, no sort
        ((0, 12, 0), True, "FlashInfer", 14),
        # from 0.17 the Triton kernel samples; the knob false changes nothing there
        ((0, 17, 0), False, "Triton top-k/top-p", 14),
    ],
)
def test_the_flashinfer_sampler_knob(version: tuple[int, ...], knob: bool, path: str, per_logit: int) -> None:
    p = profile_peak(GPT_OSS, gpu=_gpu("a100"), tp=1, ep=1, max_num_batched_tokens=16, max_num_seqs=16,
                     version=version, flashinfer_sampler=knob)  # fmt: skip
    assert (p.sampler_path, p.sampler_bytes) == (path, 16 * 201_088 * per_logit)


def test_without_flashinfer_the_plan_leaves_the_sort_bytes_out_of_the_budget() -> None:
    # vLLM 0.9.2, Llama-3.1-8B (vocab 128,256), one A100-40GB, the A100 API-server defaults max_num_batched_tokens
    # 2,048 and max_num_seqs 256: the sort path holds 38 − 14 = 24 B a logit more than FlashInfer at the profile peak
    # (determine_available_memory subtracts the torch peak), 256 × 128,256 × 24 = 788,004,864 B less KV memory
    from tests.conftest import make_plan

    sets = {"engine_version": "0.9.2", "gpu": "a100-40gb", "tp": 1, "dcp": 1, "kv_cache_dtype": "auto",
            "max_num_batched_tokens": 2048, "context_length": 8192}  # fmt: skip
    with_fi = make_plan("glm-5.3-8xh200-vllm", model="llama-3.1-8b", **sets)
    without = make_plan("glm-5.3-8xh200-vllm", model="llama-3.1-8b", flashinfer_sampler=False, **sets)
    assert with_fi.available_bytes - without.available_bytes == 256 * 128_256 * 24 == 788_004_864
    assert without.knob("flashinfer_sampler").value is False


def test_flashinfer_sampler_is_refused_where_kvplan_did_not_read_it() -> None:
    from kvplan.errors import InputError, KvplanError
    from tests.conftest import make_plan

    base = {"gpu": "h100", "tp": 1, "dcp": 1, "kv_cache_dtype": "auto", "context_length": 8192}
    with pytest.raises(InputError, match=r"flashinfer_sampler true: .*Triton"):
        make_plan("glm-5.3-8xh200-vllm", model="llama-3.1-8b", engine_version="0.19.0", flashinfer_sampler=True, **base)
    with pytest.raises(KvplanError, match=r"V0 engine.*flashinfer_sampler"):
        make_plan("glm-5.3-8xh200-vllm", model="llama-3.1-8b", engine_version="0.7.3", flashinfer_sampler=False, **base)


def test_more_than_two_gpus_without_full_nvlink_keep_the_tp1_growth() -> None:
    # custom_all_reduce.py CustomAllreduce.__init__: 'if world_size > 2 and not fully_connected: Custom allreduce is
    # disabled because it's not supported on more than two PCIe-only GPUs' (printed by 4 x RTX 4090 and 4 x A10 logs);
    # no NVSwitch either, so no NVLS: the TP1 figure, 268,435,456 B from 0.18. Two GPUs keep the fitted TP2 growth
    # (custom all-reduce is still tried there, over P2P)
    assert non_torch_bytes(4, (0, 24, 0), pcie_only=True)[0] == 268_435_456 == non_torch_bytes(1, (0, 24, 0))[0]
    assert non_torch_bytes(2, (0, 24, 0), pcie_only=True) == non_torch_bytes(2, (0, 24, 0))
    assert "without full NVLink" in non_torch_bytes(8, (0, 24, 0), pcie_only=True)[1]


def test_the_catalog_says_which_gpus_lack_nvlink() -> None:
    # datasheets: L4 / L40S / RTX 4090 have no NVLink; H100 PCIe and A40 take two-way bridges; H100 SXM is NVSwitched
    assert [_gpu(k).nvlink for k in ("l40s", "l4", "rtx-4090", "h100-pcie", "a40", "h100")] == [
        "none", "none", "none", "pairs", "pairs", "full"
    ]  # fmt: skip


def test_the_profile_run_reads_the_gpus_nvlink() -> None:
    # TP4 on four L40S (no NVLink): no custom all-reduce, the TP1 growth 268,435,456 B from 0.18; on four NVSwitched
    # H100s the TP4 growth FITTED on H100 TP4 logs, 2,170 × 2^30 // 1000 = 2,330,019,758 B. Three GPUs without full
    # NVLink are 'more than two PCIe-only GPUs' too
    args = {"tp": 4, "ep": 1, "max_num_batched_tokens": 16, "max_num_seqs": 16, "version": (0, 24, 0)}
    assert profile_peak(GPT_OSS, gpu=_gpu("l40s"), **args).non_torch_bytes == 268_435_456  # type: ignore[arg-type]
    assert profile_peak(GPT_OSS, gpu=_gpu("h100"), **args).non_torch_bytes == 2_330_019_758  # type: ignore[arg-type]
    assert non_torch_bytes(3, (0, 24, 0), pcie_only=True)[0] == 268_435_456


def test_flashinfer_sampler_false_is_planned_after_0_17_and_true_refused_from_0_17_0() -> None:
    from kvplan.errors import InputError
    from tests.conftest import make_plan

    base = {"gpu": "h100", "tp": 1, "dcp": 1, "kv_cache_dtype": "auto", "context_length": 8192}
    # false from 0.17 changes nothing (the Triton kernel samples): the plan is the default's
    off = make_plan(
        "glm-5.3-8xh200-vllm", model="llama-3.1-8b", engine_version="0.19.0", flashinfer_sampler=False, **base
    )
    assert off.available_bytes == make_plan("glm-5.3-8xh200-vllm", model="llama-3.1-8b", engine_version="0.19.0",
                                            **base).available_bytes  # fmt: skip
    with pytest.raises(InputError, match=r"flashinfer_sampler true: kvplan models vLLM 0\.17\.0"):
        make_plan("glm-5.3-8xh200-vllm", model="llama-3.1-8b", engine_version="0.17.0", flashinfer_sampler=True, **base)
