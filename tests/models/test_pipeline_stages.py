"""Pipeline parallelism plans each stage with its own layers (issue 23, item 1).

Engine source read:
- vLLM ``vllm/distributed/utils.py::get_pp_indices``: ``num_layers // pp`` a stage, the remainder one each to
  the stages before the last from the second-to-last backwards (``partitions[-i] += 1`` for i in 2 .. rem + 1);
  ``VLLM_PP_LAYER_PARTITION`` overrides it (length pp, sum num_hidden_layers, else ValueError). vLLM's own
  tests/distributed/test_pipeline_partition.py: 3 over 2 -> (0, 2), (2, 3); 4 over 3 -> 1, 2, 1; 5 over 3 -> 2, 2, 1.
- SGLang ``python/sglang/srt/distributed/utils.py::get_pp_indices``: "the last N partitions will have one extra
  layer, where N = remainder"; ``SGLANG_PP_LAYER_PARTITION`` the same override.
- A stage builds only its layers (``make_layers``: ``PPMissingLayer`` elsewhere), so its KV cell counts them;
  vLLM ``get_kv_cache_configs`` gives every worker the smallest num_blocks, SGLang ``all_reduce(MIN)`` of
  ``max_total_num_tokens``: the deployment's pool is the binding stage's.
- vLLM ``GPUModelRunner.profile_run``: ``_dummy_sampler_run`` only ``if get_pp_group().is_last_rank``.

Llama-3.1-70B (80 layers, 8 kv heads × head_dim 128, hidden 8,192, MLP 28,672, vocab 128,256, untied) at tp 4:
a GQA row is 8/4 = 2 kv heads × (128 + 128) × 2 B = 1,024 B a layer.
"""

from __future__ import annotations

import pytest

from kvplan.engines.pipeline import sglang_partition, vllm_partition
from kvplan.errors import InputError, KvplanError
from kvplan.models.arch import PipelineStage
from kvplan.models.from_hf import load_model
from kvplan.models.pipeline import parse_layer_partition, stage_group_bytes
from tests.conftest import make_plan

LLAMA_70B = {
    "model": "llama-3.1-70b",
    "gpu": "h100",
    "tp": 4,
    "pp": 2,
    "kv_cache_dtype": "auto",
    "page_size": "default",
    "mla_layout": "default",
    "attention_backend": "default",
    "context_length": "default",
}


@pytest.mark.parametrize(
    ("layers", "pp", "vllm", "sglang"),
    [
        (3, 2, (2, 1), (1, 2)),  # vLLM test_uneven_auto_partition: (0, 2), (2, 3)
        (4, 3, (1, 2, 1), (1, 1, 2)),  # vLLM: (0, 1), (1, 3), (3, 4)
        (5, 3, (2, 2, 1), (1, 2, 2)),  # vLLM: (0, 2), (2, 4), (4, 5)
        (61, 2, (31, 30), (30, 31)),  # DeepSeek-V3: 30 each, the one extra layer
        (80, 2, (40, 40), (40, 40)),
        (78, 4, (19, 20, 20, 19), (19, 19, 20, 20)),  # 19 each, remainder 2
    ],
)
def test_partition_rules(layers: int, pp: int, vllm: tuple[int, ...], sglang: tuple[int, ...]) -> None:
    assert vllm_partition(layers, pp) == vllm
    assert sglang_partition(layers, pp) == sglang


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_each_stage_counts_its_own_layers(engine: str) -> None:
    # 40 layers a stage × 1,024 B = 40,960 B a row (was 80 × 1,024 = 81,920 B on every GPU: the pool ~half)
    p = make_plan(f"glm-5.3-8xh200-{engine}", **{**LLAMA_70B, "engine": engine})
    assert p.main_layers == 40
    assert p.cell.total_bytes == 40 * 1_024 == 40_960
    assert [(s.stage.start, s.stage.end) for s in p.stages] == [(0, 40), (40, 80)]
    assert [s.cell_bytes for s in p.stages] == [40_960, 40_960]
    # the pool is the engine's arithmetic on that cell: SGLang rows = available // cell // page × page; vLLM
    # num_blocks = available // (block × cell), pool tokens num_blocks × block
    page = p.page_tokens
    if engine == "sglang":
        assert p.rows == p.available_bytes // 40_960 // page * page
    else:
        assert p.rows == p.available_bytes // (page * 40_960) * page
    assert p.logged_tokens == min(s.logged_tokens for s in p.stages)


def test_stage_weights_llama_70b() -> None:
    # Stage 0 of Llama-3.1-70B at tp 4 (bf16): every layer group × 40/80, the embedding half of the embeddings
    # group (embed_tokens and lm_head are 128,256 × 8,192 each), the 32 MiB rotary cache one a process:
    #   attention q, o   10,737,418,240 × 2 B / 4 / 2 =  2,684,354,560
    #   k, v              1,342,177,280 × 2 B / 4 / 2 =    335,544,320
    #   MLP              56,371,445,760 × 2 B / 4 / 2 = 14,092,861,440
    #   embed_tokens      2,101,346,304 × 2 B / 4 / 2 =    525,336,576
    #   norms                 1,318,912 × 2 B / 2     =      1,318,912
    #   rotary cache      131,072 × 128 × 2 B         =     33,554,432
    #   total                                          = 17,672,970,240 (the last stage the same, lm_head for embed)
    p = make_plan("glm-5.3-8xh200-sglang", **{**LLAMA_70B, "engine": "sglang"})
    want = 2_684_354_560 + 335_544_320 + 14_092_861_440 + 525_336_576 + 1_318_912 + 33_554_432
    assert [s.weights_bytes for s in p.stages] == [want, want] == [17_672_970_240] * 2


def test_vllm_last_stage_binds_on_the_sampler() -> None:
    # vLLM samples in the profiling run on the last stage only. T 8,192, R 1,024, H100 132 SMs, tp 4:
    #   sampler side: 1,024 × 128,256 × 14 + 132 × 128,256 × 4 + (8,192 + 2 × 1,024) × 8,192 × 2
    #               = 1,838,678,016 + 67,719,168 + 167,772,160 = 2,074,169,344
    #   forward:      8,192 × (3 × 28,672 / 4 + 4 × 8,192) × 2 = 889,192,448
    # Equal weights on both stages, so stage 0's budget is larger by 2,074,169,344 − 889,192,448, and stage 1 binds.
    p = make_plan("glm-5.3-8xh200-vllm", **{**LLAMA_70B, "engine": "vllm"})
    s0, s1 = p.stages
    assert s0.available_bytes - s1.available_bytes == 2_074_169_344 - 889_192_448 == 1_184_976_896
    assert (s0.binding, s1.binding) == (False, True)
    assert p.available_bytes == s1.available_bytes


@pytest.mark.parametrize(("engine", "layers"), [("vllm", (31, 30)), ("sglang", (30, 31))])
def test_uneven_split_deepseek_v3(engine: str, layers: tuple[int, int]) -> None:
    # DeepSeek-V3, 61 layers over pp 2; MLA bf16 on H200 (kv_cache_dtype auto): (512 + 64) × 2 = 1,152 B a layer
    p = make_plan(
        f"glm-5.3-8xh200-{engine}",
        model="deepseek-v3",
        tp=8,
        pp=2,
        nodes=2,
        speculative_num_draft_tokens=0,
        kv_cache_dtype="auto",
        mla_layout="default",
        attention_backend="default",
    )
    assert tuple(s.stage.layers for s in p.stages) == layers
    assert [s.cell_bytes for s in p.stages] == [n * 1_152 for n in layers]


def test_moe_dense_layers_sit_on_the_first_stage() -> None:
    # DeepSeek-V3: dense MLP on layers 0-2, experts on 3-60. vLLM stage 0 holds layers 0-30: all 3 dense layers
    # and 28 of the 58 MoE layers; stage 1 (layers 31-60) holds none of the dense and 30 of the MoE layers.
    arch = load_model("deepseek-v3")
    groups = {g.name: g for g in arch.param_groups}
    s0 = PipelineStage(rank=0, size=2, start=0, end=31, model_layers=61)
    s1 = PipelineStage(rank=1, size=2, start=31, end=61, model_layers=61)
    assert stage_group_bytes(arch, groups["dense_mlp"], 3_000, s0) == 3_000
    assert stage_group_bytes(arch, groups["dense_mlp"], 3_000, s1) == 0
    assert stage_group_bytes(arch, groups["routed_experts"], 58_000, s0) == 28_000
    assert stage_group_bytes(arch, groups["routed_experts"], 58_000, s1) == 30_000
    # untied embed + head: half on each end
    assert stage_group_bytes(arch, groups["embeddings"], 1_000, s0) == 500
    assert stage_group_bytes(arch, groups["embeddings"], 1_000, s1) == 500


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_env_override_partition(engine: str) -> None:
    # pp_layer_partition [41, 39] (VLLM_PP_LAYER_PARTITION / SGLANG_PP_LAYER_PARTITION=41,39): cells 41 × 1,024
    # and 39 × 1,024; the '41,39' env form and a list both read
    p = make_plan(f"glm-5.3-8xh200-{engine}", **{**LLAMA_70B, "engine": engine, "pp_layer_partition": "41,39"})
    assert [(s.stage.start, s.stage.end) for s in p.stages] == [(0, 41), (41, 80)]
    assert [s.cell_bytes for s in p.stages] == [41_984, 39_936]
    assert parse_layer_partition([41, 39]) == parse_layer_partition("41, 39") == (41, 39)


@pytest.mark.parametrize(
    ("partition", "pp", "words"),
    [
        ("41,40", 2, "summing to 81 layers"),  # the engines: sum(partitions) != num_hidden_layers
        ("80", 2, "1 stages given for pp 2"),  # len(partitions) != pp_size
        ("40,x", 2, "whole number"),
        ("80,0", 2, "whole number"),
    ],
)
def test_env_override_refused(partition: str, pp: int, words: str) -> None:
    with pytest.raises(KvplanError, match=words):
        make_plan("glm-5.3-8xh200-vllm", **{**LLAMA_70B, "engine": "vllm", "pp": pp, "pp_layer_partition": partition})


def test_unmodelled_refused() -> None:
    # SGLang server_args: pp and a speculative algorithm are exclusive unless SGLANG_ENABLE_PP_SPEC=1; vLLM's MTP
    # drafter fails SupportsPP under pp > 1 (vllm issue #52069)
    with pytest.raises(InputError, match="speculative decoding with pp 2: SGLang"):
        make_plan("glm-5.3-8xh200-sglang", pp=2, nodes=2, speculative_num_draft_tokens=3)
    with pytest.raises(InputError, match="speculative decoding with pp 2: vLLM"):
        make_plan("glm-5.3-8xh200-vllm", pp=2, nodes=2, speculative_num_draft_tokens=3)
    with pytest.raises(InputError, match="pipeline parallelism"):
        make_plan("glm-5.3-8xh200-sglang", model="qwen3-next-80b-a3b", pp=2, nodes=2, tp=8)


def test_pp1_has_no_stages() -> None:
    p = make_plan("glm-5.3-8xh200-sglang", **{**LLAMA_70B, "engine": "sglang", "pp": 1})
    assert p.stages == () and p.main_layers == 80


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_dsa_indexer_layers_per_stage(engine: str) -> None:
    # GLM-5.3 (78 layers, bf16 MLA 1,152 B + indexer K 132 B a full layer), pp 2 -> layers 0-38 and 39-77 on both
    # engines. Full layers: vLLM's rule (index_topk_freq 4, index_skip_topk_offset 3: max(i − 2, 0) % 4 == 0) and
    # SGLang's indexer_types give the same 21: {0, 1, 2, 6, 10, ..., 74}. Stage 0 owns 0, 1, 2, 6, ..., 38 = 12,
    # stage 1 owns 42, ..., 74 = 9 (counted by their model index, not from 0 again).
    #   stage 0: 39 × 1,152 + 12 × 132 = 46,512;  stage 1: 39 × 1,152 + 9 × 132 = 46,116
    p = make_plan(
        f"glm-5.3-8xh200-{engine}",
        pp=2,
        nodes=2,
        speculative_num_draft_tokens=0,
        kv_cache_dtype="auto",
        mla_layout="default",
        attention_backend="default",
    )
    assert [s.cell_bytes for s in p.stages] == [39 * 1_152 + 12 * 132, 39 * 1_152 + 9 * 132] == [46_512, 46_116]


def test_whole_model_figures_sum_the_stages() -> None:
    # A PD hand-off of 131,072 tokens (whole pages of 1 on SGLang's GQA page): each stage's 4 ranks send their own
    # layers, so the total is 131,072 × (40,960 + 40,960) × 4 = 131,072 × 81,920 × 4 = 42,949,672,960 B, as at
    # pp 1; one rank of the binding stage sends 131,072 × 40,960 = 5,368,709,120 B.
    from kvplan.plan.prefix import prefix_hit
    from kvplan.plan.transfer import transfer

    p = make_plan("glm-5.3-8xh200-sglang", **{**LLAMA_70B, "engine": "sglang"})
    t = transfer(p, 131_072)
    assert t.total_bytes == 131_072 * 81_920 * 4 == 42_949_672_960
    assert t.bytes_per_rank == 131_072 * 40_960 == 5_368_709_120
    # prefix FLOPs count every layer of the model (80 = 40 + 40), not the binding stage's 40:
    # 64 heads × (128 + 128) × 2 FLOPs a pair × 80 layers
    h = prefix_hit(p, 8_192, 4_096)
    assert h.indexer_layers == 80
    assert h.flops(1) == 64 * (128 + 128) * 2 * 80


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_dsa_pattern_per_stage(engine: str) -> None:
    # index_topk_pattern 'FFSFSSFS' (8 layers) over pp 3: vLLM get_pp_indices (3, 3, 2) -> 'FFS', 'FSS', 'FS'
    # (2, 1, 1 full layers); SGLang (2, 3, 3) -> 'FF', 'SFS', 'SFS' (2, 1, 1). Over pp 2 both split 4 / 4:
    # 'FFSF' (3) and 'SSFS' (1). The rows: 1,152 B MLA bf16 a layer + 132 B indexer K a full layer.
    arch = load_model("tests/data/hf/pattern/config.json")
    sets = {"kv_cache_dtype": "auto", "mla_layout": "default", "attention_backend": "default", "tp": 8, "nodes": 3}
    p3 = make_plan(f"glm-5.3-8xh200-{engine}", model=arch, pp=3, speculative_num_draft_tokens=0, **sets)
    layers3 = (3, 3, 2) if engine == "vllm" else (2, 3, 3)
    full3 = (2, 1, 1)
    assert [s.cell_bytes for s in p3.stages] == [n * 1_152 + f * 132 for n, f in zip(layers3, full3, strict=True)]
    p2 = make_plan(f"glm-5.3-8xh200-{engine}", model=arch, pp=2, speculative_num_draft_tokens=0, **sets)
    assert [s.cell_bytes for s in p2.stages] == [4 * 1_152 + 3 * 132, 4 * 1_152 + 1 * 132]
