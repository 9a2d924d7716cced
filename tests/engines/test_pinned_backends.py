"""Which attention backends each engine accepts on which compute capability, at every SM boundary of the tables
in kvplan.engines.backends (issue 26: the table's ``min_sm`` / ``max_sm`` moved by one survived).

kvplan writes a compute capability major.minor as ``major × 10 + minor``: an engine check ``capability.major == 10``
(vLLM ``FlashInferMLASparseBackend.supports_compute_capability``: "FlashInfer sparse MLA targets Blackwell (SM
10.x)") is SM 100-109; ``capability >= DeviceCapability(8, 0)`` (vLLM ``FlashAttentionBackend``) is SM 80 and up.
Each engine's rule per backend (the sources block of kvplan/engines/backends.py):

- SGLang 0.5.23: FlashMLA (flashmla_sparse / _kv / _auto, flashmla) SM 9.x-10.x; fa3 SM 8.x-9.x (DSA: 9.x, the
  indexer's DeepGEMM MQA-logits kernels need SM90+); trtllm (TRT-LLM gen) and trtllm_mla / cutlass_mla / trtllm_mha
  / fa4 SM 10.x (trtllm also on 9.x for DCP, ``_dsa_dcp_overrides``); flashinfer_sparse_mla SM 12.x; tilelang (CUDA,
  bf16 cache only) SM90+; flashinfer MLA SM80+, MHA SM75+; triton SM70+.
- vLLM 0.33.0: FLASH_ATTN_MLA_SPARSE (bf16) and FLASHINFER_MLA_SPARSE_SM90 SM 9.x; FLASHMLA_SPARSE / FLASHMLA SM
  9.x-10.x; FLASHINFER_MLA_SPARSE, FLASH_ATTN_MLA_SPARSE_FA4 (bf16), FLASHINFER_MLA, CUTLASS_MLA SM 10.x;
  FLASH_ATTN_MLA SM 9.x; TRITON_MLA SM80+; FLASH_ATTN SM80+, FLASHINFER SM75+, TRITON_ATTN / FLEX_ATTENTION SM70+.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from kvplan.engines.backends import check_backend, dsa_fp8_layout, valid_backends
from kvplan.errors import PlanError
from kvplan.models.deployment import load_deployment
from kvplan.models.formats import MlaLayout


def _gpu(sm: int):  # type: ignore[no-untyped-def]
    return replace(load_deployment("glm-5.3-8xh200-sglang").gpu, sm=sm, name=f"SM{sm} GPU")


FLASHMLA3 = ("flashmla_sparse", "flashmla_kv", "flashmla_auto")


@pytest.mark.parametrize(
    ("sm", "expected"),
    [
        (89, ()),
        (90, (*FLASHMLA3, "fa3", "trtllm", "tilelang")),
        (99, (*FLASHMLA3, "fa3", "trtllm", "tilelang")),
        (100, (*FLASHMLA3, "trtllm", "tilelang")),
        (109, (*FLASHMLA3, "trtllm", "tilelang")),
        (110, ("tilelang",)),
        (119, ("tilelang",)),
        (120, ("tilelang", "flashinfer_sparse_mla")),
        # SM 12.9, the last minor of major 12: still the SM 12.x rows (max_sm's default 129)
        (129, ("tilelang", "flashinfer_sparse_mla")),
    ],
)
def test_sglang_dsa_backends_with_a_bf16_cache(sm: int, expected: tuple[str, ...]) -> None:
    assert valid_backends("sglang", _gpu(sm), dsa=True, fp8=False) == expected


@pytest.mark.parametrize(
    ("sm", "expected"),
    [
        (69, ()),
        (70, ("triton",)),
        (79, ("triton",)),
        (80, ("flashinfer", "fa3", "triton")),
        (89, ("flashinfer", "fa3", "triton")),
        (90, ("flashinfer", "fa3", "flashmla", "triton")),
        (99, ("flashinfer", "fa3", "flashmla", "triton")),
        (100, ("flashinfer", "flashmla", "cutlass_mla", "trtllm_mla", "triton")),
        (109, ("flashinfer", "flashmla", "cutlass_mla", "trtllm_mla", "triton")),
        (110, ("flashinfer", "triton")),
    ],
)
def test_sglang_mla_backends(sm: int, expected: tuple[str, ...]) -> None:
    assert valid_backends("sglang", _gpu(sm), dsa=False, fp8=False) == expected


@pytest.mark.parametrize(
    ("sm", "expected"),
    [
        (69, ()),
        (70, ("triton",)),
        (74, ("triton",)),
        (75, ("flashinfer", "triton")),
        (79, ("flashinfer", "triton")),
        (80, ("fa3", "flashinfer", "triton")),
        (99, ("fa3", "flashinfer", "triton")),
        (100, ("flashinfer", "triton", "trtllm_mha", "fa4")),
        (109, ("flashinfer", "triton", "trtllm_mha", "fa4")),
        (110, ("flashinfer", "triton")),
    ],
)
def test_sglang_full_attention_backends(sm: int, expected: tuple[str, ...]) -> None:
    assert valid_backends("sglang", _gpu(sm), dsa=False, fp8=False, mha=True) == expected


@pytest.mark.parametrize(
    ("sm", "fp8", "expected"),
    [
        (89, False, ()),
        (90, False, ("FLASH_ATTN_MLA_SPARSE", "FLASHMLA_SPARSE", "FLASHINFER_MLA_SPARSE_SM90")),
        (99, False, ("FLASH_ATTN_MLA_SPARSE", "FLASHMLA_SPARSE", "FLASHINFER_MLA_SPARSE_SM90")),
        (99, True, ("FLASHMLA_SPARSE", "FLASHINFER_MLA_SPARSE_SM90")),
        (100, False, ("FLASHMLA_SPARSE", "FLASHINFER_MLA_SPARSE", "FLASH_ATTN_MLA_SPARSE_FA4")),
        (109, False, ("FLASHMLA_SPARSE", "FLASHINFER_MLA_SPARSE", "FLASH_ATTN_MLA_SPARSE_FA4")),
        (100, True, ("FLASHMLA_SPARSE", "FLASHINFER_MLA_SPARSE")),
        (110, False, ()),
    ],
)
def test_vllm_sparse_mla_backends(sm: int, fp8: bool, expected: tuple[str, ...]) -> None:
    assert valid_backends("vllm", _gpu(sm), dsa=True, fp8=fp8) == expected


@pytest.mark.parametrize(
    ("sm", "expected"),
    [
        (79, ()),
        (80, ("TRITON_MLA",)),
        (89, ("TRITON_MLA",)),
        (90, ("FLASH_ATTN_MLA", "FLASHMLA", "TRITON_MLA")),
        (99, ("FLASH_ATTN_MLA", "FLASHMLA", "TRITON_MLA")),
        (100, ("FLASHMLA", "FLASHINFER_MLA", "CUTLASS_MLA", "TRITON_MLA")),
        (109, ("FLASHMLA", "FLASHINFER_MLA", "CUTLASS_MLA", "TRITON_MLA")),
        (110, ("TRITON_MLA",)),
    ],
)
def test_vllm_dense_mla_backends(sm: int, expected: tuple[str, ...]) -> None:
    assert valid_backends("vllm", _gpu(sm), dsa=False, fp8=False) == expected


@pytest.mark.parametrize(
    ("sm", "expected"),
    [
        (69, ()),
        (70, ("TRITON_ATTN", "FLEX_ATTENTION")),
        (74, ("TRITON_ATTN", "FLEX_ATTENTION")),
        (75, ("FLASHINFER", "TRITON_ATTN", "FLEX_ATTENTION")),
        (79, ("FLASHINFER", "TRITON_ATTN", "FLEX_ATTENTION")),
        (80, ("FLASH_ATTN", "FLASHINFER", "TRITON_ATTN", "FLEX_ATTENTION")),
    ],
)
def test_vllm_full_attention_backends(sm: int, expected: tuple[str, ...]) -> None:
    assert valid_backends("vllm", _gpu(sm), dsa=False, fp8=False, mha=True) == expected


def test_only_sglang_dsa_reads_a_prefill_decode_pair() -> None:
    # SGLang's --dsa-prefill-backend / --dsa-decode-backend pair is a DSA spelling; vLLM takes one backend name
    # (AttentionBackendEnum), so "A/B" there is no backend at all
    gpu = _gpu(90)
    assert [b.name for b in check_backend("sglang", "0.5.23", gpu, "flashmla_kv/fa3", dsa=True, fp8=True)] == [
        "flashmla_kv",
        "fa3",
    ]
    with pytest.raises(PlanError, match=r"^attention_backend 'FLASHMLA_SPARSE/FLASHMLA_SPARSE' is not a backend"):
        check_backend("vllm", "0.33.0", gpu, "FLASHMLA_SPARSE/FLASHMLA_SPARSE", dsa=True, fp8=True)
    with pytest.raises(PlanError, match=r"^attention_backend 'fa3/fa3' is not a backend"):
        check_backend("sglang", "0.5.23", gpu, "fa3/fa3", dsa=False, fp8=False, mha=True)
    with pytest.raises(PlanError, match=r"expected NAME or PREFILL/DECODE"):
        check_backend("sglang", "0.5.23", gpu, "fa3/fa3/fa3", dsa=True, fp8=False)


def test_the_refusal_names_the_engine_and_its_version() -> None:
    with pytest.raises(PlanError, match=r"under SGLang 0\.5\.23 on SM90 GPU \(SM90 \(CUDA\)\) with an fp8 KV cache"):
        check_backend("sglang", "0.5.23", _gpu(90), "tilelang", dsa=True, fp8=True)


def test_trtllm_on_cuda_stores_raw_576_byte_rows() -> None:
    # calculate_mla_kv_cache_dim: trtllm on either side -> raw 576 B fp8 rows, on CUDA as on HIP
    gpu = _gpu(100)
    pair = check_backend("sglang", "0.5.23", gpu, "flashmla_kv/trtllm", dsa=True, fp8=True)
    assert dsa_fp8_layout(pair, gpu) is MlaLayout.FP8_RAW
    assert dsa_fp8_layout(pair[:1], gpu) is MlaLayout.FP8_DS_MLA
