"""Weights per GPU for every family (param_groups_from_hf): GQA dense, GQA MoE, MLA, DSA; splits and kv replication.

Every expected number is derived in a comment from the config values and the group formulas of
kvplan.models.weights (q/o h × heads × head_dim, k/v h × kv_heads × head_dim, a gated MLP 3 × h × intermediate,
experts 3 × h × moe_intermediate, routers n_experts × h, embeddings vocab × h, once when tied).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvplan.errors import ConfigError
from kvplan.models.arch import Split
from kvplan.models.load import load_model
from kvplan.models.weights import HeadsGroup, param_groups_from_hf

HF = Path(__file__).parents[1] / "data" / "hf"

LLAMA_70B: dict[str, Any] = {
    # meta-llama/Llama-3.1-70B config.json values
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 8192,
    "num_hidden_layers": 80,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "intermediate_size": 28672,
    "vocab_size": 128256,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}


def per_gpu(groups: Any, split: Split) -> int:
    return sum(g.bytes_per_gpu(split) for g in groups)


def test_llama_70b_bf16_params_and_tp8_tp4() -> None:
    w = param_groups_from_hf(LLAMA_70B, "llama-3.1-70b")
    # per layer: q + o = 2 × 8192 × 64 × 128 = 134,217,728; k + v = 2 × 8192 × 8 × 128 = 16,777,216;
    # MLP 3 × 8192 × 28672 = 704,643,072 → 855,638,016 a layer × 80 = 68,451,041,280;
    # embeddings + lm_head 2 × 128256 × 8192 = 2,101,346,304 → 70,552,387,584; norms (2 a layer + the final
    # one) 161 × 8192 = 1,318,912 → 70,553,706,496 parameters: the published count, to the parameter.
    assert w.total_params == 70_552_387_584 + 161 * 8192 == 70_553_706_496
    assert w.family == "dense GQA" and w.summary == "bf16 checkpoint" and w.assumptions == ()
    # bf16: 2 B a parameter, every linear group split 8 ways at TP8 (8 kv heads = 8 ranks: no replication), the
    # norms on every rank: 70,552,387,584 × 2 / 8 + 1,318,912 × 2 = 17,638,096,896 + 2,637,824
    # = 17,640,734,720 B (17.6 GB; the whole checkpoint 141.1 GB).
    assert per_gpu(w.groups, Split.of(tp=8)) == 70_552_387_584 * 2 // 8 + 2_637_824 == 17_640_734_720
    # TP4: 141,104,775,168 / 4 + 2,637,824 = 35,278,831,616 B.
    assert per_gpu(w.groups, Split.of(tp=4)) == 35_276_193_792 + 2_637_824 == 35_278_831_616


def test_kv_projections_replicate_past_the_kv_heads() -> None:
    w = param_groups_from_hf(LLAMA_70B, "llama-3.1-70b")
    kv = next(g for g in w.groups if g.name == "kv_proj")
    assert isinstance(kv, HeadsGroup) and kv.heads == 8
    # k + v over 80 layers: 80 × 16,777,216 = 1,342,177,280 params, 2,684,354,560 B in bf16.
    # TP16: 8 kv heads over 16 ranks → each rank holds one head: 2,684,354,560 / 8 = 335,544,320 B,
    # not the 167,772,160 B a plain 16-way split would claim.
    assert kv.bytes_per_gpu(Split.of(tp=16)) == 335_544_320
    assert kv.bytes_per_gpu(Split.of(tp=8)) == 335_544_320
    # DP attention 2 at TP16: attention TP 8 → 8 ways, one head a rank: the same 335,544,320 B.
    assert kv.bytes_per_gpu(Split.of(tp=16, dp_attention=2)) == 335_544_320
    # TP4: 2 heads a rank: 2,684,354,560 / 4 = 671,088,640 B.
    assert kv.bytes_per_gpu(Split.of(tp=4)) == 671_088_640


@pytest.mark.parametrize("name", ["glm-5", "glm-5.3", "deepseek-v3.2", "glm-5.2-freq-only", "pattern"])
def test_mla_groups_equal_the_existing_moeshape_groups(name: str) -> None:
    """Every DSA golden keeps its weights: the per-module builder gives param_groups' bytes on every split."""
    path = HF / name / "config.json"
    legacy = load_model(str(path)).param_groups
    new = param_groups_from_hf(json.loads(path.read_text()), str(path)).groups
    assert new == legacy  # the same ParamGroups, bytes per parameter written as param_groups writes them (16388/16384)
    for split in (Split.of(tp=8), Split.of(tp=8, dp_attention=8), Split.of(tp=16, ep=32, pp=2), Split.of(tp=1)):
        assert [g.bytes_per_gpu(split) for g in new] == [g.bytes_per_gpu(split) for g in legacy]


def test_inconsistent_heads_is_a_located_error() -> None:
    bad = {**LLAMA_70B, "num_key_value_heads": 6}
    with pytest.raises(ConfigError) as e:
        param_groups_from_hf(bad, "x/config.json")
    assert str(e.value) == (
        "x/config.json: num_attention_heads: 64 attention heads are not a multiple of num_key_value_heads 6"
    )


def test_fail_callback_receives_the_key_path() -> None:
    seen: list[tuple[Any, str]] = []

    def fail(path: Any, message: str) -> None:
        seen.append((path, message))
        raise ConfigError(message, source="cfg", key=str(path))

    with pytest.raises(ConfigError):
        param_groups_from_hf({**LLAMA_70B, "num_hidden_layers": None}, "cfg", fail=fail)
    assert seen == [(("num_hidden_layers",), "missing (required)")]


def test_no_hidden_size_no_groups() -> None:
    w = param_groups_from_hf({"num_hidden_layers": 2, "torch_dtype": "bfloat16"}, "x")
    assert w.groups == () and w.family == "" and w.total_params == 0
