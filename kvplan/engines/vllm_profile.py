"""vLLM V1's non-KV memory besides the weights: what its profiling run leaves as 'torch peak' and 'non-torch'."""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.models.activation import ActivationDims
from kvplan.models.deploy import Gpu
from kvplan.units import GiB, MiB, gib

SAMPLER_BYTES_PER_LOGIT_BF16 = 2 + 4 + 4 + 4
"""Live at the sampler's peak per (request, vocab entry): the model-dtype logits, their float32 copy, the float32
softmax probs and the float32 exponential noise ``q`` of random_sample (0.19.0 Sampler.forward / forward_native)."""

TRITON_TOPK_TOPP_SINCE = (0, 17, 0)
"""The Triton top-k/top-p kernel (``v1/sample/ops/topk_topp_triton.py``, in the 0.19.0 wheel, not in 0.16.0's):
before it, ``apply_top_k_top_p`` sorts the whole [R, vocab] float32 logits. The llm-d-planner version sweep
(Qwen3-14B, H100, TP1, max_model_len 8192; accuracy/results/version-sweep/runs/ at 3c876c8) logs a torch peak of
5.64 GiB on 0.15.0 and 0.16.0 and 2.23 GiB on 0.17.0 and 0.18.0 (the model: 5.64 and 2.23)."""

SORT_SAMPLER_BYTES_PER_LOGIT_BF16 = 2 + 4 + 4 + 8 + 20
"""Before 0.17: at ``logits.sort`` the bf16 logits (2), the float32 copy (4), the sorted values (4) and int64
indices (8) are live (read from the 0.16.0 wheel), plus 20 B of torch.sort's own temporaries, FITTED on the
Qwen3-14B 0.15.0 / 0.16.0 figure (a key / value double buffer of 4 + 8 B and an int64 index sequence of 8 B is one
decomposition); the later top-k / top-p masks and the out-of-place scatter stay below it (28 B)."""

FLASHINFER_SAMPLER_UNTIL = (0, 11, 1)
"""Before it, V1's TopKTopPSampler samples with FlashInfer wherever FlashInfer is installed (PR #11394; the vLLM
images ship it): ``flashinfer_sample`` -> ``top_k_top_p_sampling_from_logits``, no sort. vllm-project/vllm#26859
('Disable FlashInfer sampler by default', merged 2025-10-15, first in 0.11.1) made it opt-in. The 0.10.1.1
gpt-oss-120b log of the corpus prints 'Using FlashInfer for top-p & top-k sampling'. CUDA only (ROCm sorts)."""

FLASHINFER_SAMPLER_BYTES_PER_LOGIT_BF16 = 2 + 4 + 4 + 4
"""Live at FlashInfer's peak per (request, vocab entry): the model-dtype logits the dummy run holds, the Sampler's
float32 copy (temperature applied in place), ``top_k_mask_logits``' float32 output and its float32 softmax, which
``top_p_sampling_from_probs`` reads (flashinfer sampling.py; no sort, no cached buffer)."""

CUBLAS_WORKSPACE_BYTES = 32 * MiB
"""FITTED: the torch peak every llm-d-planner vLLM 0.19.0 log shows over the read terms: +0.028 .. +0.038 GiB, mean
0.032 GiB, on the 11 sweep logs that are not config-alone cases (Qwen2.5-7B, gemma-2-2b/9b/27b, phi-2, phi-4,
granite-3.1-2b, Qwen2.5-72B TP2, Qwen1.5-MoE-A2.7B, DeepSeek-V2-Lite, gpt-oss-20b TP2; vocabularies 32K-256K, dense
and MoE); the held-out case logs fall in the same band. PyTorch's default cuBLAS workspace on Hopper
(CUBLAS_WORKSPACE_CONFIG :4096:8 = 32 MiB, allocated through the caching allocator) is the likely owner."""

FORWARD_HIDDEN_TENSORS = 4
"""FITTED: [T, hidden] tensors live with a dense MLP's gate_up and act outputs at the forward pass's peak (embedding
output, residual, normed input, layer output); fitted on CodeLlama-7b (0.77 GiB logged) and granite-3.1-8b
(0.85 GiB), the two sweep logs whose forward pass outweighs the sampler; within ±0.02 GiB on both."""

NON_TORCH_BY_TP = {1: 250 * GiB // 1000, 2: 2070 * GiB // 1000}
"""FITTED: 'non-torch forward increase memory' of the llm-d-planner vLLM 0.19.0 logs on H100 80GB (SXM) that are not
config-alone cases: TP1 0.24-0.26 GiB (median 0.25: cuBLAS / CUDA context growth after the snapshot;
the three granite logs print 0.46), TP2 2.06-2.11 GiB on 6 (median 2.07: NCCL buffers, NVLS on NVSwitch systems,
custom all-reduce), TP4 2.13 / 2.17 / 2.21 GiB on 3 (median 2.17, NON_TORCH_TP_WIDE)."""

NON_TORCH_TP1_BEFORE_0_18 = 130 * GiB // 1000
"""FITTED: the version sweep's TP1 non-torch growth on 0.15.0-0.17.0 (0.13 GiB; 0.25 GiB on 0.18.0 and 0.19.0)."""

NON_TORCH_TP_WIDE = 2170 * GiB // 1000
"""FITTED on TP4 logs; ASSUMED for TP above 4 (no public vLLM log at TP8 prints the figure)."""

SM_COUNT = {
    "h100-sxm": 132, "h100-nvl": 132, "h100-pcie": 114, "h200": 132, "h200-nvl": 132, "h800": 132, "h20": 78,
    "h20-3e": 78, "gh200-96gb": 132, "gh200-144gb": 132, "b200": 148, "gb200": 152, "b300": 148, "gb300": 152,
    "a100-80gb": 108, "a100-80gb-pcie": 108, "a100-40gb": 108, "a800-80gb": 108, "a800-80gb-pcie": 108, "a40": 84,
    "l4": 58, "l40": 142, "l40s": 142, "rtx-3090": 82, "rtx-4090": 128, "rtx-5090": 170, "rtx-6000-ada": 142,
    "rtx-pro-6000": 188, "gb10": 48, "mi300x": 304, "mi308x": 80, "mi325x": 304, "mi355x": 256, "mi250x": 110,
}  # fmt: skip
"""Multiprocessors (compute units on AMD) per GPU, from the vendors' datasheets (an MI250X's 220 CUs are two GCDs of
110, and each GCD is one device, as kvplan's mi250x is): the Triton top-k/top-p kernel
runs min(SMs, requests) programs and caches a float32 [min(next_power_of_2(programs), SMs), vocab] buffer
(batches of 8 requests or more; below that vLLM sorts in PyTorch, not modelled). Unknown GPU: 132 (ASSUMED)."""
DEFAULT_SM_COUNT = 132


@dataclass(frozen=True, kw_only=True)
class ProfilePeak:
    """vLLM's profiling-run figures for one GPU of a deployment, term by term (bytes)."""

    tokens: int
    """T: max_num_batched_tokens, the dummy forward pass's size."""
    requests: int
    """R = min(T, max_num_seqs): the requests the dummy batch is split into, one sampled token each."""
    sampler_bytes: int
    """R × vocab × 14 B (bf16; 12 B in float32, where the float32 copy is the logits themselves)."""
    topk_topp_buffer_bytes: int
    """min(SMs, R) × vocab × 4 B: the Triton top-k/top-p kernel's cached buffer."""
    hidden_kept_bytes: int
    """(T + 2R) × hidden × dtype: the forward's output, the last-token gather and its rand_like copy."""
    forward_bytes: int
    """T × (3 × dense I/tp + 4 × hidden) × dtype (FITTED shape; 0 without hidden size)."""
    moe_workspace_bytes: int
    """T × top_k × (max(I_e, hidden) + max(2·I_e, hidden)) × dtype, I_e = expert width / tp (TritonExperts)."""
    attention_workspace_bytes: int = 0
    """DeepSeek-V4's prefill gather workspace (kvplan.engines.vllm_dsv4_memory): the same ``WorkspaceManager``
    buffer as the MoE workspace, so the larger of the two is held, not both."""
    cublas_bytes: int = CUBLAS_WORKSPACE_BYTES
    non_torch_bytes: int
    non_torch_origin: str
    sampler_path: str = "Triton top-k/top-p"
    """'Triton top-k/top-p' (0.17 and later: 14 B per logit), 'sort' (0.11.1-0.16 and ROCm: 38 B per logit, FITTED
    in part) or 'FlashInfer' (before 0.11.1 on CUDA: 14 B per logit, no buffer)."""

    @property
    def sampler_side_bytes(self) -> int:
        return self.sampler_bytes + self.topk_topp_buffer_bytes + self.hidden_kept_bytes

    @property
    def torch_peak_bytes(self) -> int:
        """vLLM's 'torch peak memory increase'."""
        return max(self.forward_bytes, self.sampler_side_bytes) + self.workspace_bytes + self.cublas_bytes

    @property
    def workspace_bytes(self) -> int:
        """The worker's one ``WorkspaceManager`` buffer: grown to the largest request (v1/worker/workspace.py)."""
        return max(self.moe_workspace_bytes, self.attention_workspace_bytes)

    @property
    def total_bytes(self) -> int:
        """Torch peak + non-torch: vLLM's 'Total non KV cache memory' less the weights."""
        return self.torch_peak_bytes + self.non_torch_bytes

    def summary(self) -> str:
        """One line for the plan's knob origin and chain: each term, and which are fitted."""
        peak_side = "sampler" if self.sampler_side_bytes >= self.forward_bytes else "forward pass (FITTED shape)"
        moe = f" + MoE workspace {gib(self.moe_workspace_bytes, 'engine')}" if self.moe_workspace_bytes else ""
        if self.attention_workspace_bytes > self.moe_workspace_bytes:
            moe = f" + DeepSeek-V4 prefill gather workspace {gib(self.attention_workspace_bytes, 'engine')}" + (
                " (shares the MoE workspace's buffer)" if self.moe_workspace_bytes else ""
            )
        sampler = (
            "no sampler: a PP stage before the last" if self.sampler_path == "no" else f"{self.sampler_path} sampler"
        )
        return (
            f"vLLM profile run ({sampler}): torch peak {gib(self.torch_peak_bytes, 'engine')} = {peak_side} "
            f"{gib(max(self.forward_bytes, self.sampler_side_bytes), 'engine')} "
            f"(logits {self.requests:,} requests × vocab, "
            f"{self.tokens:,} tokens){moe} + cuBLAS {self.cublas_bytes // MiB} MiB (FITTED); non-torch "
            f"{gib(self.non_torch_bytes, 'engine')} ({self.non_torch_origin})"
        )


def _next_power_of_2(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


def non_torch_bytes(
    tp: int, version: tuple[int, ...] = (0, 19, 0), *, across_nodes: bool = False, pcie_only: bool = False
) -> tuple[int, str]:
    """(bytes, origin) of the non-torch growth at a tensor-parallel size. A TP group spread over nodes builds no
    custom all-reduce (vllm/distributed/device_communicators/custom_all_reduce.py CustomAllreduce.__init__: 'Custom
    allreduce is disabled because this process group spans across nodes') and no NVLS buffers (NVLink SHARP needs
    the NVSwitch domain of one node): it keeps the TP1 growth, ASSUMED (NCCL over the network stages little). So does
    a group of more than two GPUs that are not fully NVLink-connected (``pcie_only``: the same __init__, 'not
    supported on more than two PCIe-only GPUs'; no NVSwitch, so no NVLS either)."""
    if across_nodes and tp > 1:
        nt, origin = non_torch_bytes(1, version)
        return nt, f"{origin}, ASSUMED for a TP{tp} group across nodes (no custom all-reduce, no NVLS)"
    if pcie_only and tp > 2:
        nt, origin = non_torch_bytes(1, version)
        return nt, f"{origin}, ASSUMED for a TP{tp} group without full NVLink (no custom all-reduce, no NVLS)"
    if tp == 1 and version < (0, 18, 0):
        return NON_TORCH_TP1_BEFORE_0_18, "FITTED on the Qwen3-14B 0.15-0.17 version sweep"
    if tp in NON_TORCH_BY_TP:
        return NON_TORCH_BY_TP[tp], f"FITTED on vLLM 0.19.0 H100 TP{tp} logs"
    if tp <= 4:
        return NON_TORCH_TP_WIDE, f"FITTED on vLLM 0.19.0 H100 TP4 logs (tp {tp})"
    return NON_TORCH_TP_WIDE, f"FITTED on TP4 logs, ASSUMED for tp {tp}"


# How the profiling run is read:
#
# Read from the vLLM 0.19.0 wheel (``v1/worker/gpu_model_runner.py`` profile_run / _dummy_run /
# _dummy_sampler_run, ``v1/sample/sampler.py``, ``v1/sample/ops/topk_topp_sampler.py``,
# ``v1/sample/ops/topk_topp_triton.py``, ``model_executor/layers/fused_moe/modular_kernel.py`` and
# ``fused_moe.py`` TritonExperts.workspace_shapes, ``v1/worker/workspace.py``, ``utils/mem_utils.py``
# memory_profiling). vLLM logs ``Total non KV cache memory = weights + torch peak increase + non-torch increase``;
# the pool is ``ceil(total × util) − that`` (− the CUDA-graph estimate from 0.21 on). The profiling run:
#
# 1. ``_dummy_run(max_num_batched_tokens)``: one forward pass of T = max_num_batched_tokens tokens split over
#    R = min(T, max_num_seqs) requests. It keeps the output hidden states ``[T, hidden]`` and gathers the last
#    token of each request, ``[R, hidden]``.
# 2. ``_dummy_sampler_run``: ``torch.rand_like`` of those ``[R, hidden]``, then ``compute_logits`` -> ``[R, vocab]``
#    in the model dtype, which stays referenced while the Sampler makes a float32 copy, the Triton top-k/top-p
#    kernel masks it in place with a cached ``[min(SMs, R), vocab]`` float32 buffer, ``softmax`` gives float32
#    probs and ``random_sample`` a float32 ``q`` of the same shape: at the peak 2 + 4 + 4 + 4 = 14 B per
#    (request, vocab entry) in bf16.
# 3. MoE: the modular fused-MoE kernel takes its workspace from the ``WorkspaceManager``, which keeps it for the
#    life of the worker: ``[T, top_k, max(I/tp, hidden)] + [T, top_k, max(2·I/tp, hidden)]`` elements (TritonExperts;
#    the output shares the first), allocated in the forward pass and still held when the sampler runs. An MXFP4
#    checkpoint (gpt-oss) runs its experts through the monolithic 'TRITON' Mxfp4 kernel
#    (``MoEPrepareAndFinalizeNoDPEPMonolithic`` in its start-up log), which takes no such workspace: three vLLM
#    0.19.0 gpt-oss-20b logs (TP1, TP2, TP2 at 0.95) print a torch peak of 2.87 GiB, the sampler side alone
#    (tests/engines/test_hybrid_field_logs.py). ASSUMED the same in the other versions and on other GPUs.
#
# So ``torch peak = max(forward, sampler + hidden states kept) + workspace + cuBLAS workspace``, the workspace the
# larger of the MoE one and DeepSeek-V4's prefill gather (one WorkspaceManager buffer).
#
# What is fitted, not read (each term says so in the plan): the forward pass of a dense model
# (``3 × I/tp + 4 × hidden`` activations per token: gate_up, act and four ``[T, hidden]`` tensors, fitted on two
# logs where it exceeds the sampler), the 32 MiB residual every log shows over the read terms (PyTorch's cuBLAS
# workspace on Hopper, 8 × 4 MiB, is the likely owner), and the non-torch growth by tensor parallelism. The
# fit used only llm-d-planner logs that are not config-alone cases (tests/runbook/config_alone/vllm_v1.py names
# them); the cases are held out.
def profile_peak(
    dims: ActivationDims,
    *,
    gpu: Gpu,
    tp: int,
    ep: int,
    max_num_batched_tokens: int,
    max_num_seqs: int,
    version: tuple[int, ...] = (0, 19, 0),
    samples: bool = True,
    attention_workspace_bytes: int = 0,
    across_nodes: bool = False,
    flashinfer_sampler: bool | None = None,
) -> ProfilePeak:
    """The profiling run's peak terms on one GPU (pure: the model's dimensions, the deployment, the vLLM release).

    ``attention_workspace_bytes``: a model's attention workspace from the same ``WorkspaceManager`` buffer
    (DeepSeek-V4, kvplan.engines.vllm_dsv4_memory); the buffer holds the larger of it and the MoE workspace.
    ``across_nodes``: the TP group spans nodes (fewer GPUs a node than tp; non_torch_bytes).
    ``samples`` False: a pipeline stage before the last, where ``profile_run`` skips ``_dummy_sampler_run``
    (``if get_pp_group().is_last_rank``): no sampler side, the forward pass alone.

    Experts are split by tp unless expert parallelism is on (then each GPU holds whole experts of full width).
    Releases 0.11.1-0.14 are ASSUMED to sort like 0.15 / 0.16 (before 0.11.1: FlashInfer, FLASHINFER_SAMPLER_UNTIL);
    after 0.19 to sample like 0.19 (source not read).
    """
    t = max_num_batched_tokens
    r = min(t, max_num_seqs)
    d = dims.dtype_bytes
    h = dims.hidden_size
    triton = version >= TRITON_TOPK_TOPP_SINCE
    flashinfer = version < FLASHINFER_SAMPLER_UNTIL and gpu.vendor != "amd"
    if flashinfer_sampler is not None and not triton:  # the deployment says (VLLM_USE_FLASHINFER_SAMPLER, install)
        flashinfer = flashinfer_sampler
    if triton:
        per_logit = SAMPLER_BYTES_PER_LOGIT_BF16 if d == 2 else 4 + 4 + 4
    elif flashinfer:  # a float32 model's logits are their own float32 copy: 2 + 4 B become 4 B
        per_logit = FLASHINFER_SAMPLER_BYTES_PER_LOGIT_BF16 if d == 2 else FLASHINFER_SAMPLER_BYTES_PER_LOGIT_BF16 - 2
    else:
        per_logit = SORT_SAMPLER_BYTES_PER_LOGIT_BF16 if d == 2 else SORT_SAMPLER_BYTES_PER_LOGIT_BF16 - 2
    sms = SM_COUNT.get(gpu.key, DEFAULT_SM_COUNT)
    rows = min(_next_power_of_2(min(sms, r)), sms) if triton else 0
    dense = dims.dense_intermediate // tp
    forward = t * (3 * dense + FORWARD_HIDDEN_TENSORS * h) * d
    moe = 0
    if dims.is_moe and not dims.moe_monolithic:  # a monolithic MXFP4 kernel takes no WorkspaceManager workspace
        ie = dims.expert_intermediate // (1 if ep > 1 else tp)
        moe = t * dims.experts_per_token * (max(ie, h) + max(2 * ie, h)) * d
    nt, nt_origin = non_torch_bytes(tp, version, across_nodes=across_nodes, pcie_only=gpu.nvlink != "full")
    on = int(samples)
    return ProfilePeak(
        tokens=t,
        requests=r,
        sampler_bytes=on * r * dims.vocab_size * per_logit,
        topk_topp_buffer_bytes=on * rows * dims.vocab_size * 4,
        hidden_kept_bytes=on * (t + 2 * r) * h * d,
        forward_bytes=forward,
        moe_workspace_bytes=moe,
        attention_workspace_bytes=attention_workspace_bytes,
        non_torch_bytes=nt,
        non_torch_origin=nt_origin,
        sampler_path=("Triton top-k/top-p" if triton else "FlashInfer" if flashinfer else "sort") if samples else "no",
    )
