"""A config's routed experts laid out as runs (``config_tensors(runs=True)``, ``Tensor.count``) size exactly as the
same tensors one at a time: the runs are a shape of the same layout, never a second estimate.

The one-at-a-time layout is the reference (each tensor as vLLM's expert_params_mapping names it: its own tests in
test_pinned_config_tensors.py pin names, shapes and the published totals); here every figure of the runs' path is
compared with it, and the run boundaries are derived from the config and the quantization rule that makes them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvplan.models.arch import Split
from kvplan.models.config_tensors import config_tensors
from kvplan.models.safetensors import CheckpointIndex, Tensor, expanded, listed_only, reconcile
from kvplan.models.sharding import param_groups_from_tensors, place, shard

HF = Path(__file__).parents[1] / "data" / "hf"
LAID_OUT = sorted(
    p.parent.name for p in HF.glob("*/config.json") if config_tensors(json.loads(p.read_text())) is not None
)
SPLITS = (
    Split.of(tp=1, dp_attention=1, ep=1),
    Split.of(tp=8, dp_attention=1, ep=8),
    Split.of(tp=8, dp_attention=8, ep=3),
    Split.of(tp=6, dp_attention=1, ep=1),
)


def _config(name: str) -> dict[str, Any]:
    config: dict[str, Any] = json.loads((HF / name / "config.json").read_text())
    return config


def _both(config: dict[str, Any]) -> tuple[tuple[Tensor, ...], tuple[Tensor, ...]]:
    one, runs = config_tensors(config), config_tensors(config, runs=True)
    assert one is not None and runs is not None
    return one, runs


def _experts_bf16(name: str, *modules: str) -> dict[str, Any]:
    """``name``'s config with ``modules`` (single experts' linears) left unquantized by modules_to_not_convert."""
    config = _config(name)
    q = config["quantization_config"]
    return {**config, "quantization_config": {**q, "modules_to_not_convert": [*q["modules_to_not_convert"], *modules]}}


def test_laid_out_configs_include_experts_of_both_families() -> None:
    # the comparisons below must reach runs: MLA MoE (DeepSeek, GLM-5.x), GQA MoE (Qwen3-MoE, Mixtral)
    assert {"glm-5.3", "deepseek-v3", "qwen3-30b-a3b-fp8", "mixtral-8x7b"} <= set(LAID_OUT)


@pytest.mark.parametrize("name", LAID_OUT)
def test_runs_expand_to_the_same_tensors(name: str) -> None:
    one, runs = _both(_config(name))
    key = lambda t: (t.name, t.dtype, t.shape)  # noqa: E731
    assert sorted(map(key, expanded(runs))) == sorted(map(key, one))
    assert sum(t.nbytes for t in runs) == sum(t.nbytes for t in one)
    assert sum(t.count for t in runs) == len(one)


@pytest.mark.parametrize("name", LAID_OUT)
def test_runs_shard_and_group_as_the_tensors_do(name: str) -> None:
    config = _config(name)
    one, runs = _both(config)
    layers, kv = config["num_hidden_layers"], config.get("num_key_value_heads") or 0
    # ep 3: rank 0's share of experts ends inside a run; every split with or without the MTP layers
    for split, ep, mtp in zip(SPLITS, (1, 8, 3, 1), (False, True, False, True), strict=True):
        kw: dict[str, Any] = {"num_layers": layers, "num_kv_heads": kv, "ep": ep, "with_mtp": mtp}
        assert shard(runs, split, **kw) == shard(one, split, **kw), (split, ep, mtp)
    a = param_groups_from_tensors(one, num_layers=layers, num_kv_heads=kv)
    b = param_groups_from_tensors(runs, num_layers=layers, num_kv_heads=kv)
    figures = lambda g: (g.name, g.params, g.bytes_per_param_num, g.n_experts, [g.bytes_per_gpu(s) for s in SPLITS])  # noqa: E731
    assert [figures(g) for g in b] == [figures(g) for g in a]


def test_glm_5_3_runs_are_one_entry_a_tensor_of_a_moe_layer() -> None:
    # GLM-5.3 config.json: 78 layers, first_k_dense_replace 3, 1 MTP layer (num_nextn_predict_layers), 256 routed
    # experts, block-fp8 (one quantization_config for every linear module): MoE layers 78 - 3 + 1 = 76, each with
    # gate / up / down x (weight, weight_scale_inv) = 6 runs of 256 experts
    _, runs = _both(_config("glm-5.3"))
    counted = [t for t in runs if t.count > 1]
    assert len(counted) == 76 * 6
    assert {t.count for t in counted} == {256}
    assert {t.name.split(".experts.")[1].split(".")[0] for t in counted} == {"0"}


def test_experts_the_quantization_config_names_split_their_layers_runs() -> None:
    # Qwen3-30B-A3B-FP8: 128 experts, fp8 blocks; the gate_proj of layer 1's experts 5, 8 and 100 left bf16 split
    # layer 1's experts into 0-4, 5, 6-7, 8, 9-99, 100, 101-127 (each span alike in all three modules), every other
    # layer one run of 128
    named = [f"model.layers.1.mlp.experts.{e}.gate_proj" for e in (5, 8, 100)]
    one, runs = _both(_experts_bf16("qwen3-30b-a3b-fp8", *named))
    gate = [(t.name.split(".experts.")[1].split(".")[0], t.dtype, t.count) for t in runs
            if ".layers.1.mlp.experts." in t.name and t.name.endswith("gate_proj.weight")]  # fmt: skip
    assert gate == [("0", "F8_E4M3", 5), ("5", "BF16", 1), ("6", "F8_E4M3", 2), ("8", "BF16", 1),
                    ("9", "F8_E4M3", 91), ("100", "BF16", 1), ("101", "F8_E4M3", 27)]  # fmt: skip
    layer1 = {t.name.split(".experts.")[1]: t.count for t in runs if ".layers.1.mlp.experts." in t.name}
    assert layer1["5.up_proj.weight"] == layer1["100.down_proj.weight_scale_inv"] == 1  # fp8 beside a bf16 gate
    assert "5.gate_proj.weight_scale_inv" not in layer1  # a bf16 module has no scales
    assert {t.count for t in runs if ".layers.2.mlp.experts." in t.name} == {128}
    split = Split.of(tp=8, dp_attention=1, ep=8)
    # rank 0 holds experts 0-15 (ep 8: the runs 9-99 cut, 100 and 101-127 past it) or 0-42 (ep 3)
    for ep in (1, 3, 8):
        kw: dict[str, Any] = {"num_layers": 48, "ep": ep, "with_mtp": False}
        assert shard(runs, split, **kw) == shard(one, split, **kw)


def test_rank_0_holds_its_whole_experts_of_each_run() -> None:
    # Qwen3-30B-A3B (bf16): 48 MoE layers of 128 experts, each 3 x 768 x 2,048 x 2 B = 9,437,184 B.
    # vLLM FusedMoE determine_expert_map: global // ep experts a rank, the remainder one each to the first ranks, so
    # rank 0 holds ceil(128 / ep); the rest of max(tp, ep) / ep slices each expert's intermediate dim (moe_tp).
    # tp 8, ep 8: 16 whole experts -> 48 x 16 x 9,437,184 = 7,247,757,312 B
    # tp 8, ep 3: 43 experts sliced 8 // 3 = 2 ways -> 48 x 43 x 9,437,184 / 2 = 9,739,173,888 B
    # tp 8, ep 1: all 128 sliced 8 ways -> 48 x 128 x 9,437,184 / 8 = 7,247,757,312 B
    _, runs = _both(_config("qwen3-30b-a3b"))
    split = Split.of(tp=8, dp_attention=1, ep=8)
    routed = {ep: shard(runs, split, num_layers=48, ep=ep).category("routed_experts") for ep in (8, 3, 1)}
    assert routed == {8: 7_247_757_312, 3: 9_739_173_888, 1: 7_247_757_312}


def test_expanded_names_each_expert_of_a_run() -> None:
    run = Tensor("model.layers.4.mlp.experts.6.down_proj.weight", "F8_E4M3", (7, 3), 3)
    assert [t.name for t in expanded((run,))] == [f"model.layers.4.mlp.experts.{e}.down_proj.weight" for e in (6, 7, 8)]
    assert all(t.count == 1 and t.shape == (7, 3) and t.dtype == "F8_E4M3" for t in expanded((run,)))
    # four-bit: each tensor rounds up to whole bytes on its own (7 x 3 x 4 bits = 10.5 -> 11 B), three of them 33 B
    assert Tensor("x.experts.0.w", "F4", (7, 3), 3).nbytes == 33
    assert Tensor("x.experts.0.w", "F4", (7, 3), 3).numel == 63


def test_a_shard_index_keeps_a_run_it_lists_whole_and_the_experts_it_lists_of_one_it_does_not() -> None:
    run = Tensor("model.layers.2.mlp.experts.0.up_proj.weight", "BF16", (4, 2), 4)
    names = {f"model.layers.2.mlp.experts.{e}.up_proj.weight" for e in range(4)}
    assert listed_only((run,), names) == (run,)
    kept = listed_only((run,), names - {"model.layers.2.mlp.experts.2.up_proj.weight"})
    assert [(t.name.split(".")[5], t.count) for t in kept] == [("0", 1), ("1", 1), ("3", 1)]
    two = Tensor("model.layers.2.mlp.experts.0.up_proj.weight", "BF16", (4, 2), 2)  # its first listed, not its second
    assert listed_only((two,), {"model.layers.2.mlp.experts.0.up_proj.weight"}) == (Tensor(two.name, "BF16", (4, 2)),)


def test_reconciling_runs_with_an_index_is_reconciling_their_tensors() -> None:
    # DeepSeek-V3 laid out both ways against an index that lists all but layer 5's expert 9 gate_proj weight and
    # adds one name the config does not derive
    one, runs = _both(_config("deepseek-v3"))
    gone = "model.layers.5.mlp.experts.9.gate_proj.weight"
    names = (*(t.name for t in one if t.name != gone), "model.extra.weight")
    index = CheckpointIndex(source="index.json", total_size=sum(t.nbytes for t in one), names=names)
    a, b = reconcile(index, one), reconcile(index, runs)
    assert (a.explained_bytes, a.unknown_names, a.missing_names) == (b.explained_bytes, b.unknown_names, (gone,))
    assert a.missing_names == (gone,)
    assert sum(t.nbytes for t in listed_only(runs, set(names))) == a.explained_bytes


def test_a_run_no_whole_expert_rule_places_is_placed_tensor_by_tensor() -> None:
    # 'unknown_proj' matches no rule (sharding._RULES): unrecognised, replicated, each tensor listed by its own name;
    # a run of gate_proj is a routed expert's column split (expert_col) and stays one entry of 3
    odd = Tensor("model.layers.0.mlp.experts.4.unknown_proj.weight", "BF16", (8, 2), 2)
    placed = place((odd,), num_layers=1)
    assert [(p.name.split(".")[5], p.category, p.alike, p.expert) for p in placed] == [
        ("4", "unrecognised", 1, -1), ("5", "unrecognised", 1, -1)
    ]  # fmt: skip
    gate = Tensor("model.layers.0.mlp.experts.4.gate_proj.weight", "BF16", (8, 2), 3)
    assert [(p.category, p.how, p.alike, p.expert) for p in place((gate,), num_layers=1)] == [
        ("routed_experts", "expert_col", 3, 4)
    ]


def test_a_shards_total_is_the_checkpoints_published_total() -> None:
    # mistralai/Mixtral-8x7B-v0.1 model.safetensors.index.json "total_size": 93405585408 (derived from the config in
    # test_pinned_config_tensors.py): every tensor once whatever the split, its 8 experts a layer as runs
    _, runs = _both(_config("mixtral-8x7b"))
    for ep in (1, 8):
        assert shard(runs, Split.of(tp=8, dp_attention=1, ep=ep), num_layers=32, ep=ep).total_bytes == 93_405_585_408


def test_a_layer_without_routed_experts_lists_no_run() -> None:
    # DeepSeek-V3's config with n_routed_experts 0 (untrusted input): its MoE layers hold no expert tensor one at a
    # time, so the runs hold none either (an empty run of count 0 is not a tensor)
    config = {**_config("deepseek-v3"), "n_routed_experts": 0}
    one, runs = _both(config)
    assert not [t.name for t in one if ".experts." in t.name]
    assert [t.name for t in runs if t.count != 1] == []
    assert sorted(t.name for t in runs) == sorted(t.name for t in one)
