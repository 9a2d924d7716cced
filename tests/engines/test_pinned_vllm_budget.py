"""kvplan.engines.vllm_budget pinned: the DSA buffers at their boundaries and the non-KV "other" memory (mutation
check).

Engine source read (vllm-project/vllm; /work/shared/reference/vllm-0.33.0.md §6):
- ``models/deepseek_v2.py``: ``topk_indices_buffer = torch.empty(max_num_batched_tokens, index_topk, int32)``; the
  MTP module (``nvidia/mtp.py``) allocates its own buffer of the same size;
- ``v1/attention/backends/mla/index_group.py``: each index group holds ``physical_topk_indices`` (rows + 1) ×
  index_topk int32 and ``valid_topk_counts`` (rows + 1) int32, rows = min(max_num_batched_tokens, max_num_seqs ×
  (1 + num_speculative_tokens));
- ``config/attention.py``: the sparse prefill workspace factor 5 when max_model_len <= 256K, else 2;
  ``indexer.py``: the indexer prefill buffer holds max_model_len × (576 × 2 // 132 = 8) × factor entries of 132 B.
GLM-5.3: index_topk 2,048, indexer K 128 + 128 / 128 × 4 = 132 B a token.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from kvplan.engines import plan_pool
from kvplan.engines.common import weights_knob
from kvplan.engines.vllm_budget import dsa_buffers
from kvplan.errors import InputError
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model
from kvplan.units import MiB
from tests.engines.test_vllm_v4 import plan as v4_plan

LLAMA = [
    "model=llama-3.1-8b", "tp=1", "speculative_num_draft_tokens=0", "kv_cache_dtype=auto", "mla_layout=default",
    "attention_backend=default", "page_size=default",
]  # fmt: skip


@pytest.mark.parametrize(
    ("max_model_len", "prefill"),
    [
        (262_144, 262_144 * 8 * 5 * 132),  # 256K: factor 5 -> 1,384,120,320 B
        (262_145, 262_145 * 8 * 2 * 132),  # one past: factor 2 -> 553,650,240 B
    ],
)
def test_dsa_buffers_with_mtp(max_model_len: int, prefill: int) -> None:
    # T 8,192, R 1,024, 3 draft tokens: rows = min(8,192, 1,024 × 4) = 4,096
    #   topk: 8,192 × 2,048 × 4 B = 67,108,864, twice (the MTP module's own) = 134,217,728
    #   per index group: 4,097 × 2,048 × 4 + 4,097 × 4 = 33,562,624 + 16,388 = 33,579,012; × 21 = 705,159,252
    arch = load_model("glm-5.3")
    b = dsa_buffers(arch, mnbt=8_192, max_num_seqs=1_024, spec=3, max_model_len=max_model_len, indexer_layers=21)
    assert b == {
        "topk_indices_buffer_bytes": 134_217_728,
        "physical_topk_bytes": 705_159_252,
        "indexer_prefill_buffer_bytes": prefill,
    }
    assert prefill in (1_384_120_320, 553_650_240)


def test_dsa_buffers_without_mtp() -> None:
    # no draft: rows = min(2,048, 1,024 × 1) = 1,024; one top-k buffer 2,048 × 2,048 × 4 = 16,777,216;
    # per group 1,025 × 2,048 × 4 + 1,025 × 4 = 8,396,800 + 4,100 = 8,400,900, × 2 groups = 16,801,800
    arch = load_model("glm-5.3")
    b = dsa_buffers(arch, mnbt=2_048, max_num_seqs=1_024, spec=0, max_model_len=1_000, indexer_layers=2)
    assert b["topk_indices_buffer_bytes"] == 16_777_216
    assert b["physical_topk_bytes"] == 16_801_800
    assert b["indexer_prefill_buffer_bytes"] == 1_000 * 8 * 5 * 132 == 5_280_000


def test_no_dsa_buffers_without_an_indexer() -> None:
    arch = load_model("llama-3.1-8b")
    assert dsa_buffers(arch, mnbt=8_192, max_num_seqs=1_024, spec=0, max_model_len=8_192, indexer_layers=0) == {}


def test_the_assumed_graph_estimate_is_the_v4_flash_log() -> None:
    # 'Estimated CUDA graph memory: 1.58 GiB total' (DeepSeek-V4-Flash, vLLM 0.25.0): 1,618 MiB = 1,696,595,968 B,
    # budgeted by vLLM 0.21 on (0.33 here), named with its figure in MiB
    p = plan_pool(load_model("llama-3.1-8b"), load_deployment("glm-5.3-8xh200-vllm", LLAMA))
    (graph,) = [t for t in p.chain if t.label == "CUDA-graph estimate"]
    assert graph.bytes == 1_618 * MiB == 1_696_595_968
    assert "1,618 MiB" in graph.detail
    assert p.knob("non_kv_other").origin.startswith("default: profile run + CUDA-graph estimate (ASSUMED): ")
    # non-KV = weights + the profile run's terms (+ no DSA buffers on a GQA model): requested − available
    terms = {t.label: t.bytes for t in p.chain}
    other = terms["torch peak (profiling run)"] + terms["non-torch growth"] + 1_696_595_968
    assert p.knob("non_kv_other").value == other
    assert terms["available KV cache memory"] == terms["requested"] - terms["weights per GPU"] - other


def test_eager_drops_the_graph_term_and_says_so() -> None:
    p = plan_pool(
        load_model("llama-3.1-8b"), load_deployment("glm-5.3-8xh200-vllm", [*LLAMA, "disable_cuda_graph=true"])
    )
    assert p.knob("non_kv_other").origin.startswith("default: profile run: ")
    assert [t.bytes for t in p.chain if "CUDA-graph" in t.label] == [0]


def test_dsa_origin_names_the_calibration() -> None:
    p = plan_pool(load_model("glm-5.3"), load_deployment("glm-5.3-8xh200-vllm", []))
    assert p.knob("non_kv_other").origin.startswith(
        "default: calibrated on vllm-project/recipes PR #893 (DSA): profile run + CUDA-graph estimate (ASSUMED)"
        " + DSA calibration term: "
    )


@pytest.mark.parametrize(
    ("extra", "value", "words"),
    [
        # a config without hidden / vocab size keeps the GLM-5.3-calibrated 6,070 MiB = 6,364,856,320 B
        (
            [],
            6_070 * MiB,
            "default: calibrated on vllm-project/recipes PR #893 (the config gives no hidden / vocab size)",
        ),
        # under --enforce-eager less the assumed 1,618 MiB graph estimate: 4,452 MiB = 4,668,260,352 B
        (
            ["disable_cuda_graph=true"],
            4_452 * MiB,
            "default: calibrated on vllm-project/recipes PR #893 (the config gives no hidden / vocab size) less the"
            " assumed CUDA-graph estimate 1,618 MiB (--enforce-eager: no CUDA graphs)",
        ),
    ],
)
def test_non_kv_other_without_a_profile(extra: list[str], value: int, words: str) -> None:
    arch = replace(load_model("llama-3.1-8b"), activation=None)
    p = plan_pool(arch, load_deployment("glm-5.3-8xh200-vllm", [*LLAMA, *extra]))
    assert p.knob("non_kv_other").value == value
    assert value in (6_364_856_320, 4_668_260_352)
    assert p.knob("non_kv_other").origin == words


# Fresh seed 3630 (25 of 29): the sampler's version boundary, DeepSeek-V4's load buffers and the torch-peak term.


@pytest.mark.parametrize(("version", "refused"), [("0.16.0", False), ("0.17.0", True)])
def test_flashinfer_sampler_is_refused_from_the_triton_sampler(version: str, refused: bool) -> None:
    # vllm_profile.TRITON_TOPK_TOPP_SINCE: the Triton top-k/top-p kernel (v1/sample/ops/topk_topp_triton.py) is in
    # the sampler from 0.17.0; kvplan did not read FlashInfer sampling beside it, so 0.17.0 itself is refused and
    # 0.16.0 (the whole-vocab sort) is planned
    dep = load_deployment("glm-5.3-8xh200-vllm", [*LLAMA, f"engine_version={version}", "flashinfer_sampler=true"])
    if refused:
        with pytest.raises(InputError, match=r"flashinfer_sampler true: kvplan models vLLM 0\.17\.0's sampler"):
            plan_pool(load_model("llama-3.1-8b"), dep)
    else:
        assert plan_pool(load_model("llama-3.1-8b"), dep).knob("weights_per_gpu").value > 0


def test_v4_estimated_weights_add_the_load_buffers() -> None:
    # DeepseekV4Model.__init__ (deepseek_v4.py), V4-Flash at max_num_batched_tokens 8,192 (tests/models/
    # test_v4_gh200_refusal.py): topk_indices_buffer 8,192 × 512 × 4 B = 16,777,216 and _mtp_hidden_buffer 8,192 ×
    # 4 × 4,096 × 2 B = 268,435,456, allocated while loading: vLLM's "Model loading took" is the estimate plus both
    p = v4_plan("deepseek-v4-flash", tp=2)
    dep = p.deployment
    bare = weights_knob(load_model("deepseek-v4-flash"), dep, with_mtp=dep.mtp).as_int()
    assert p.knob("weights_per_gpu").as_int() - bare == 16_777_216 + 268_435_456 == 285_212_672


def test_the_torch_peak_term_carries_the_torch_half_of_the_profile() -> None:
    # the chain prints the profile's torch peak and its non-torch growth as two terms: the first term's words stop
    # before the non-torch part, which the second term carries
    p = plan_pool(load_model("llama-3.1-8b"), load_deployment("glm-5.3-8xh200-vllm", LLAMA))
    (peak,) = [t for t in p.chain if t.label == "torch peak (profiling run)"]
    assert peak.detail.startswith("vLLM profile run (Triton top-k/top-p sampler): torch peak ")
    assert "non-torch" not in peak.detail
