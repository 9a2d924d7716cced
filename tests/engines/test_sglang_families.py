"""The questions SGLang's hybrid chain asks a family record and a cache kind instead of an architecture name or an
``isinstance`` (kvplan/engines/sglang_families.py, kvplan/models/cache.py), and the typed policy keys of
kvplan/versions.py. Expected values from SGLang 0.5.23's source, cited per test."""

from __future__ import annotations

import typing

import pytest

from kvplan.engines.sglang_families import FAMILIES, family_of
from kvplan.engines.sglang_hybrid_sizer import mamba_slots_per_request
from kvplan.models.cache import (
    CompressedAttention,
    FullAttention,
    IndexerK,
    Layer,
    LinearState,
    MlaLatent,
    SlidingWindow,
)
from kvplan.models.formats import MlaLayout
from kvplan.models.from_hf import load_model
from kvplan.versions import SGLANG, SglangCapacity, SglangMemFraction

EXTRA_BUFFER = {
    "Qwen3_5ForConditionalGeneration",
    "Qwen3_5MoeForConditionalGeneration",
    "Qwen3NextForCausalLM",
    "KimiLinearForCausalLM",
    "Glm5NextForConditionalGeneration",
}
"""``arg_groups/overrides.py`` ``_MAMBA_EXTRA_BUFFER_ARCHS``, the architectures kvplan reads (the first three are in
the frozenset as published; Kimi-Linear and GLM-5.3-Flash are enrolled in 0.5.23, tests/cli/test_hybrid_presets_kimi.py
and tests/engines/test_sglang_glm5_next.py derive their 5 slots a request from it)."""


@pytest.mark.parametrize("architecture", sorted(FAMILIES))
def test_state_slots_per_request_follow_the_extra_buffer_list(architecture: str) -> None:
    # _calculate_mamba_ratio: MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO 3 + get_mamba_tracking_slots (2 with the
    # overlap scheduler) for an extra_buffer architecture, 3 otherwise (no_buffer)
    family = FAMILIES[architecture]
    assert family.mamba_extra_buffer == (architecture in EXTRA_BUFFER)
    assert mamba_slots_per_request(extra_buffer=family.mamba_extra_buffer) == (5 if architecture in EXTRA_BUFFER else 3)


def test_an_architecture_sglang_treats_alike_has_the_default_record() -> None:
    # gpt-oss (GptOssForCausalLM) is a SWA hybrid with no override in the hybrid chain: no extra buffer, no draft
    record = family_of(load_model("gpt-oss-120b"))
    assert (record.mamba_extra_buffer, record.speculative, record.no_draft, record.dsa_pool) == (
        False,
        False,
        "",
        False,
    )


def test_only_glm5_next_has_the_dsa_token_pool_and_only_kimi_linear_has_no_draft() -> None:
    # _build_hybrid_linear_kv_pool: HybridLinearKVPool over DSATokenToKVPool for glm5_next_config only; SGLang ships
    # no KimiLinear NextN model (models/), so a draft is refused for it alone
    assert {a for a, f in FAMILIES.items() if f.dsa_pool} == {"Glm5NextForConditionalGeneration"}
    assert {a for a, f in FAMILIES.items() if f.no_draft} == {"KimiLinearForCausalLM"}


def test_a_layer_answers_its_window_and_its_compressed_attention() -> None:
    sw = SlidingWindow(8, 64, 64, window=128)
    comp = CompressedAttention(512, 64, 128, 4)
    assert Layer(0, (sw,)).window == sw and Layer(0, (sw,)).compressed is None
    assert Layer(1, (comp, IndexerK(128))).compressed == comp and Layer(1, (comp,)).window is None
    # a full-attention layer is not a window, though SlidingWindow subclasses FullAttention
    assert Layer(2, (FullAttention(8, 64, 64),)).window is None
    assert Layer(3, (LinearState("gated_deltanet", 32, 16, 128, 128, 4),)).window is None


def test_row_bytes_of_each_token_kind_one_method_for_both_engines() -> None:
    # MHATokenToKVPool: K (head_dim) + V (v_head_dim) of max(1, 8 // 8) = 1 kv head per rank, bf16: 1 × 256 × 2
    assert FullAttention(8, 128, 128).row_bytes(8, "bf16", None) == 512
    # MLATokenToKVPool: (kv_lora_rank + rope) × 2 = (512 + 64) × 2 in bf16; the FlashMLA fp8_ds_mla row
    # 512 + 512 / 128 × 4 + 64 × 2 = 656 (DESIGN §2.2), whatever the attention tp
    assert MlaLatent(512, 64).row_bytes(8, "bfloat16", MlaLayout.BF16) == 1152
    assert MlaLatent(512, 64).row_bytes(1, "fp8_e4m3", MlaLayout.FP8_DS_MLA) == 656
    with pytest.raises(ValueError, match="row layout"):
        MlaLatent(512, 64).row_bytes(1, "bfloat16", None)


def test_every_version_row_names_a_typed_policy_key() -> None:
    # the keys are Literal types (a typo is a mypy error); every row's value is one of them at run time too
    heuristics, tables = typing.get_args(SglangMemFraction), typing.get_args(SglangCapacity)
    assert {r.mem_fraction for r in SGLANG if r.modelled} <= set(heuristics)
    assert {r.capacity for r in SGLANG if r.modelled} <= set(tables)
