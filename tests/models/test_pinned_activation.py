"""The profiling-run dimensions read from real config.json files (kvplan/models/activation.py ``activation_dims``),
pinned at the branches the mutation check moves: which MLP is the dense one, a MoE's routed width and top-k, the
activation element size and the MXFP4 monolithic experts.

The fields' meaning is the engines' model code: vLLM ``model_executor/models/deepseek_v2.py`` (dense MLPs of
``intermediate_size`` in the first ``first_k_dense_replace`` layers, ``n_shared_experts × moe_intermediate_size``
shared), ``mixtral.py`` (``num_local_experts`` of ``intermediate_size``), ``qwen3_moe.py`` (``num_experts`` of
``moe_intermediate_size``, no shared expert), ``qwen3_next.py`` (``shared_expert_intermediate_size``),
``gpt_oss.py`` (``num_local_experts``, MXFP4).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvplan.models.activation import ActivationDims, activation_dims

HF = Path(__file__).parents[1] / "data" / "hf"


def _config(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((HF / name / "config.json").read_text())
    return data


def _dims(config: dict[str, Any]) -> tuple[int, int, int, int, int, int, bool, bool]:
    d = activation_dims(config)
    assert d is not None
    return (d.hidden_size, d.vocab_size, d.dense_intermediate, d.expert_intermediate, d.experts_per_token,
            d.dtype_bytes, d.moe_monolithic, d.is_moe)  # fmt: skip


@pytest.mark.parametrize(
    ("config", "dims"),
    [
        # dense: intermediate_size 14,336 is the MLP; no experts; bfloat16 -> 2 B
        ("llama-3.1-8b", (4_096, 128_256, 14_336, 0, 0, 2, False, False)),
        # DeepSeek-V3: 3 dense layers of 18,432 (first_k_dense_replace 3), 256 routed of 2,048, top-8
        ("deepseek-v3", (7_168, 129_280, 18_432, 2_048, 8, 2, False, True)),
        # Mixtral: num_local_experts 8 of intermediate_size 14,336, top-2, no dense MLP and no shared expert
        ("mixtral-8x7b", (4_096, 32_000, 0, 14_336, 2, 2, False, True)),
        # Qwen3-235B-A22B: 128 experts (num_experts) of 1,536, top-8, no shared expert: no dense MLP (its
        # intermediate_size 12,288 is no layer's)
        ("qwen3-235b-a22b", (4_096, 151_936, 0, 1_536, 8, 2, False, True)),
        # gpt-oss-120b: 128 local experts of 2,880, top-4, quant_method mxfp4 -> monolithic experts; no torch_dtype
        # in its config.json: bfloat16, 2 B
        ("gpt-oss-120b", (2_880, 201_088, 0, 2_880, 4, 2, True, True)),
    ],
)
def test_real_configs(config: str, dims: tuple[int, ...]) -> None:
    assert _dims(_config(config)) == dims


def test_shared_experts_are_the_dense_mlp_without_dense_layers() -> None:
    # DeepSeek-V3's fields without its dense layers: n_shared_experts 1 × 2,048 = 2,048 (max with the absent
    # shared_expert_intermediate_size 0); with 2 shared experts 4,096
    cfg = {k: v for k, v in _config("deepseek-v3").items() if k != "first_k_dense_replace"}
    assert _dims(cfg)[2] == 2_048
    assert _dims({**cfg, "n_shared_experts": 2})[2] == 4_096
    # Qwen3-Next style: shared_expert_intermediate_size 512 and no n_shared_experts -> 512
    qwen = {"hidden_size": 2_048, "vocab_size": 151_936, "moe_intermediate_size": 512, "num_experts": 512,
            "num_experts_per_tok": 10, "shared_expert_intermediate_size": 512}  # fmt: skip
    assert _dims(qwen)[2:5] == (512, 512, 10)


def test_a_mixtral_with_first_k_dense_replace_still_has_no_dense_mlp() -> None:
    # mixtral.py has no dense layers: first_k_dense_replace is a DeepSeek field, read only where experts are not
    # num_local_experts
    assert _dims({**_config("mixtral-8x7b"), "first_k_dense_replace": 1})[2] == 0


@pytest.mark.parametrize(("field", "value"), [("n_routed_experts", 64), ("num_experts", 60)])
def test_each_routed_expert_field_makes_a_moe(field: str, value: int) -> None:
    cfg = {"hidden_size": 2_048, "vocab_size": 1_000, "moe_intermediate_size": 1_408, field: value,
           "num_experts_per_tok": 1}  # fmt: skip
    assert _dims(cfg)[3:5] == (1_408, 1) and _dims(cfg)[7]


def test_top_k_without_experts_is_dense() -> None:
    # num_experts_per_tok with no expert count is not a MoE: 0 routed, 0 top-k, the intermediate_size is dense
    cfg = {"hidden_size": 64, "vocab_size": 100, "intermediate_size": 256, "num_experts_per_tok": 2}
    assert _dims(cfg)[2:5] == (256, 0, 0)
    # experts without a width (no moe_intermediate_size) route nothing: top-k reads 0
    cfg = {"hidden_size": 64, "vocab_size": 100, "intermediate_size": 256, "num_experts": 8, "num_experts_per_tok": 2}
    assert _dims(cfg)[2:5] == (256, 0, 0)


@pytest.mark.parametrize(
    ("dtype", "size"),
    [({"torch_dtype": "float32"}, 4), ({"dtype": "float32"}, 4), ({"torch_dtype": "float16"}, 2), ({}, 2)],
)
def test_activation_element_size(dtype: dict[str, str], size: int) -> None:
    # a float32 checkpoint computes in 4 B; bf16 / fp16 (and no dtype: bfloat16) in 2 B
    assert _dims({"hidden_size": 64, "vocab_size": 100, **dtype})[5] == size


def test_mxfp4_without_experts_is_not_monolithic() -> None:
    cfg = {
        "hidden_size": 64,
        "vocab_size": 100,
        "intermediate_size": 256,
        "quantization_config": {"quant_method": "mxfp4"},
    }
    assert _dims(cfg)[6] is False


@pytest.mark.parametrize("value", [0, 1, 4_096, -1, True, "8", 2**40])
def test_a_field_is_a_plain_integer_from_0(value: object) -> None:
    # 0 and 1 are read as themselves; junk (negative, bool, text, past kvplan's MAX_DIM) is 0
    got = _dims({"hidden_size": 64, "vocab_size": 100, "intermediate_size": value})[2]
    assert got == (value if value in (0, 1, 4_096) and value is not True else 0)


def test_a_moe_needs_both_top_k_and_a_width() -> None:
    def dims(topk: int, width: int) -> ActivationDims:
        return ActivationDims(hidden_size=1, vocab_size=1, dense_intermediate=0, expert_intermediate=width,
                              experts_per_token=topk)  # fmt: skip

    assert [dims(1, 1).is_moe, dims(0, 1).is_moe, dims(1, 0).is_moe] == [True, False, False]
    assert dims(1, 1).dtype_bytes == 2  # bf16 unless said


def test_an_expert_width_without_experts_is_dense() -> None:
    # moe_intermediate_size alone (no expert count, no top-k): no expert is routed, the MLP is intermediate_size
    cfg = {"hidden_size": 64, "vocab_size": 100, "intermediate_size": 256, "moe_intermediate_size": 128}
    assert _dims(cfg)[2:5] == (256, 0, 0) and not _dims(cfg)[7]
