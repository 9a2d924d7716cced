"""One pipeline stage's share of the weights (kvplan/models/pipeline.py), pinned where the mutation check moves it.

vLLM ``model_executor/models/utils.py::make_layers`` / SGLang ``make_layers`` with ``get_pp_indices``: a stage
builds its own decoder layers [start, end) only; ``LlamaModel.__init__``: ``embed_tokens`` on the first rank (and
the last when tied), ``lm_head`` on the last. So a layer group spread over layers [first, end) is held in
proportion to the layers of it the stage owns, rounded up to a byte; an untied embed + LM head is half on each end,
a tied one whole on both; a buffer every process builds (params 0) whole on every stage.
"""

from __future__ import annotations

import pytest

from kvplan.models.arch import ParamGroup, PipelineStage
from kvplan.models.from_hf import load_model
from kvplan.models.pipeline import parse_layer_partition, stage_group_bytes

LLAMA = load_model("llama-3.1-8b")  # vocab 128,256 × hidden 4,096, untied


def _stage(rank: int, size: int, start: int, end: int, layers: int = 32) -> PipelineStage:
    return PipelineStage(rank=rank, size=size, start=start, end=end, model_layers=layers)


def test_a_layer_group_by_the_layers_a_stage_owns() -> None:
    g = ParamGroup(name="attention", params=32_000, bytes_per_param_num=2)
    # 32 layers: layers 0-9 hold 10 / 32 of 1,000,001 B -> ceil(10,000,010 / 32) = 312,501
    assert stage_group_bytes(LLAMA, g, 1_000_001, _stage(0, 2, 0, 10)) == 312_501
    assert stage_group_bytes(LLAMA, g, 1_000_001, _stage(1, 2, 10, 32)) == 687_501  # ceil(22,000,022 / 32)


def test_a_group_on_some_layers_only() -> None:
    # DeepSeek-style dense MLP on layers 0-2 (layer_span (0, 3)): a stage of layers 2-31 owns 1 of its 3 layers,
    # one of 3-31 none, one of 0-1 two
    dense = ParamGroup(name="dense_mlp", params=3, bytes_per_param_num=2, layer_span=(0, 3))
    assert stage_group_bytes(LLAMA, dense, 900, _stage(1, 2, 2, 32)) == 300
    assert stage_group_bytes(LLAMA, dense, 900, _stage(1, 2, 3, 32)) == 0
    assert stage_group_bytes(LLAMA, dense, 900, _stage(0, 2, 0, 2)) == 600
    # experts on layers 3-31 (29 layers): layers 0-15 own 13 of them -> ceil(2,900 × 13 / 29) = 1,300
    experts = ParamGroup(name="routed_experts", params=29, bytes_per_param_num=2, layer_span=(3, 32))
    assert stage_group_bytes(LLAMA, experts, 2_900, _stage(0, 2, 0, 16)) == 1_300


def test_untied_embeddings_are_half_on_each_end() -> None:
    untied = ParamGroup(name="embeddings", params=2 * 128_256 * 4_096, bytes_per_param_num=2)
    whole = 2 * 128_256 * 4_096 * 2
    assert stage_group_bytes(LLAMA, untied, whole, _stage(0, 3, 0, 10)) == whole // 2  # embed_tokens
    assert stage_group_bytes(LLAMA, untied, whole, _stage(1, 3, 10, 20)) == 0
    assert stage_group_bytes(LLAMA, untied, whole, _stage(2, 3, 20, 32)) == whole // 2  # lm_head
    assert stage_group_bytes(LLAMA, untied, whole, _stage(0, 1, 0, 32)) == whole  # one stage holds both
    # tied (one vocab × hidden matrix): whole on the first stage and on the last
    tied = ParamGroup(name="embeddings", params=128_256 * 4_096, bytes_per_param_num=2)
    assert stage_group_bytes(LLAMA, tied, whole // 2, _stage(0, 2, 0, 16)) == whole // 2
    assert stage_group_bytes(LLAMA, tied, whole // 2, _stage(0, 1, 0, 32)) == whole


def test_a_buffer_is_whole_on_every_stage() -> None:
    rotary = ParamGroup(name="rotary_cache", params=0, bytes_per_param_num=1)
    assert stage_group_bytes(LLAMA, rotary, 67_108_864, _stage(1, 4, 8, 16)) == 67_108_864


@pytest.mark.parametrize(
    ("value", "stages"), [("41,39", (41, 39)), ([30, 31], (30, 31)), (1, (1,)), (" 2, 3 ", (2, 3))]
)
def test_a_partition_is_whole_numbers_from_1(value: object, stages: tuple[int, ...]) -> None:
    assert parse_layer_partition(value) == stages


@pytest.mark.parametrize("value", ["0,40", [0, 40], [], "", [True, 3], [2.5, 3], "a,b"])
def test_a_partition_that_is_not_is_refused(value: object) -> None:
    with pytest.raises(ValueError, match=r"expected layers per stage|whole number >= 1"):
        parse_layer_partition(value)


def test_without_activation_dims_embeddings_are_taken_as_untied() -> None:
    # a model whose config gives no vocab / hidden size (a checkpoint read from its headers): embed + LM head are
    # assumed two matrices, half of the group on each end
    from dataclasses import replace

    arch = replace(LLAMA, activation=None)
    g = ParamGroup(name="embeddings", params=1_000, bytes_per_param_num=2)
    assert stage_group_bytes(arch, g, 3_000, _stage(0, 2, 0, 16)) == 1_500
    assert stage_group_bytes(arch, g, 3_000, _stage(1, 2, 16, 32)) == 1_500


def test_a_group_on_one_layer_is_whole_on_its_stage() -> None:
    # GLM-4.5-Air's one dense layer (first_k_dense_replace 1: layer_span (0, 1)): all of it on the stage with layer 0
    dense = ParamGroup(name="dense_mlp", params=1, bytes_per_param_num=2, layer_span=(0, 1))
    assert stage_group_bytes(LLAMA, dense, 777, _stage(0, 2, 0, 16)) == 777
    assert stage_group_bytes(LLAMA, dense, 777, _stage(1, 2, 16, 32)) == 0


def test_a_stage_ships_its_share_of_the_indexer_layers() -> None:
    # a GLM-5.3 checkpoint whose index lists the indexer of 39 of its 78 layers (tests/data/gate/glm-5.3-39-indexer-
    # layers.yaml): a stage of 40 layers holds ceil(39 × 40 / 78) = 20 of them, one of 38 ceil(39 × 38 / 78) = 19;
    # the config's layer count becomes the stage's
    from kvplan.models.additions import additions_group

    g = additions_group({"num_hidden_layers": 78}, indexer_layers_shipped=39)
    first = g.for_stage(_stage(0, 2, 0, 40, layers=78))
    last = g.for_stage(_stage(1, 2, 40, 78, layers=78))
    assert (first.indexer_layers_shipped, last.indexer_layers_shipped) == (20, 19)
    assert (first.config["num_hidden_layers"], last.config["num_hidden_layers"]) == (40, 38)
    assert additions_group({"num_hidden_layers": 78}).for_stage(_stage(0, 2, 0, 40, 78)).indexer_layers_shipped is None
