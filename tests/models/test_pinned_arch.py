"""Survivors of the sampled mutation check (scripts/mutate.py, issue 26) on kvplan/models/arch.py.

The indexer layers follow SGLang's ``dsa_layer_skips_topk`` (``srt/configs/model_config.py``): a layer computes
its own top-k (owns an indexer K) unless ``index_topk_pattern`` marks it "S", or, with ``index_topk_freq`` f > 1,
``max(i - offset + 1, 0) % f != 0`` (with ``index_skip_topk_offset``), else ``max(i - 1, 0) % f != 0``.
"""

from __future__ import annotations

from kvplan.engines.model_dtype import with_model_dtype
from kvplan.models.arch import (
    IndexerRule,
    ModelArch,
    ParamGroup,
    PipelineStage,
    Split,
    WeightPoint,
    full_indexer_layers,
)
from kvplan.models.cache import FullAttention, IndexerK, Layer, MlaLatent, SlidingWindow
from kvplan.models.deployment import load_deployment
from kvplan.models.formats import MlaLayout


def _full(flags: tuple[bool, ...]) -> list[int]:
    return [i for i, f in enumerate(flags) if f]


def test_freq_4_without_offset() -> None:
    # max(i - 1, 0) % 4 == 0: i = 0 (max(-1, 0) = 0), and i - 1 in {0, 4, ..., 76}, i.e. i in {1, 5, ..., 77}
    # (20 layers) → 21 of 78
    flags, rule = full_indexer_layers(78, freq=4)
    assert rule is IndexerRule.FREQ
    assert _full(flags) == [0, *range(1, 78, 4)]
    assert sum(flags) == 21


def test_freq_4_offset_3_is_glm_52s_21_of_78() -> None:
    # GLM-5.2 (index_topk_freq 4, index_skip_topk_offset 3): max(i - 2, 0) % 4 == 0 → layers 0, 1, 2, then
    # 6, 10, ..., 74: "layers that COMPUTE top-k (21 of 78): 0, 1, 2, 6, 10, ..., 74" as a public profile of the
    # checkpoint evaluates SGLang's rule
    flags, _ = full_indexer_layers(78, freq=4, offset=3)
    assert _full(flags) == [0, 1, 2, *range(6, 78, 4)]
    assert sum(flags) == 21


def test_freq_1_every_layer_and_offset_1() -> None:
    # freq 1: every layer computes (SGLang returns False from `if freq <= 1`)
    assert all(full_indexer_layers(5)[0])
    # offset 1: max(i, 0) % 2 == 0 → 0, 2, 4
    assert _full(full_indexer_layers(5, freq=2, offset=1)[0]) == [0, 2, 4]


def test_pattern_letters() -> None:
    # index_topk_pattern: "F" full, "S" shared
    flags, rule = full_indexer_layers(4, pattern="FSSF")
    assert (flags, rule) == ((True, False, False, True), IndexerRule.PATTERN)


def test_split_of_a_layout() -> None:
    # attention tp / dp_attention (DP attention replicates attention on each DP rank); experts max(tp, ep)
    assert Split.of(tp=8, dp_attention=4, ep=2) == Split(tp=8, attention=2, experts=8, pp=1)
    assert Split.of(tp=2, ep=8, pp=3) == Split(tp=2, attention=2, experts=8, pp=3)
    # dp_attention past tp still leaves one attention way; pp 0 reads as 1 stage
    assert Split.of(tp=2, dp_attention=4, pp=0) == Split(tp=2, attention=1, experts=2, pp=1)
    assert Split.of(tp=4).ways("none") == 1


# --------------------------------------------------------------------------- fresh seed 5563 and its neighbours
# (issue 26: the rest of the module's mutant classes — each default, each boundary, each term — pinned)


def _arch(**kw: object) -> ModelArch:
    return ModelArch(name="m", source="t", architecture="a", num_layers=kw.pop("num_layers", 4),  # type: ignore[arg-type]
                     num_mtp_layers=0, max_position_embeddings=4096, **kw)  # type: ignore[arg-type]  # fmt: skip


LLAMA_8B = {"num_layers": 32, "num_attention_heads": 32, "num_kv_heads": 8, "head_dim": 128}
"""meta-llama/Llama-3.1-8B config.json: 32 layers, 32 query heads, 8 kv heads, 4,096 / 32 = 128 head dim."""
DSV3 = {"num_layers": 61, "kv_lora_rank": 512, "qk_rope_head_dim": 64}
"""deepseek-ai/DeepSeek-V3 config.json: 61 layers, kv_lora_rank 512, qk_rope_head_dim 64 (no indexer)."""


def test_indexer_types_read_full_entries_only() -> None:
    # SGLang dsa_layer_skips_topk: indexer_types first; a layer computes top-k iff its entry is "full"
    flags, rule = full_indexer_layers(3, indexer_types=("full", "shared", "full"), freq=2, offset=0)
    assert (flags, rule) == ((True, False, True), IndexerRule.INDEXER_TYPES)


def test_freq_2_without_offset_and_offset_2() -> None:
    # max(i - 1, 0) % 2 == 0 → i = 0 (max(-1, 0)), 1, 3, 5
    assert _full(full_indexer_layers(6, freq=2)[0]) == [0, 1, 3, 5]
    # offset 2 (vLLM's default): max(i - 1, 0) % 2 == 0 as well → same layers; offset 4: max(i - 3, 0) → 0..3, 5
    assert _full(full_indexer_layers(6, freq=2, offset=2)[0]) == [0, 1, 3, 5]
    assert _full(full_indexer_layers(6, freq=3, offset=4)[0]) == [0, 1, 2, 3]


def test_split_defaults_and_dp_attention_of_0() -> None:
    # one GPU with no DP attention, EP or PP: every part 1 way, one stage
    assert Split.of(tp=1) == Split(tp=1, attention=1, experts=1, pp=1) == Split(tp=1, attention=1, experts=1)
    # --dp 0 / 1 is no DP attention: attention keeps all tp ways (SGLang attn_tp_size = tp // dp, dp >= 1)
    assert Split.of(tp=8, dp_attention=0).attention == 8
    assert Split.of(tp=8).attention == 8
    assert Split.of(tp=8, dp_attention=8).attention == 1
    # EP wider than tp splits whole experts ep ways (SGLang ep_size, vLLM EP over the DP x TP group)
    assert Split.of(tp=1, ep=4).experts == 4
    assert Split.of(tp=8, ep=2).experts == 8


def test_split_str_names_pp_only_past_one_stage() -> None:
    assert str(Split.of(tp=8)) == "tp 8, attention 8, experts 8"
    assert str(Split.of(tp=4, pp=2)) == "tp 4, attention 4, experts 4, pp 2"


def test_split_order_is_its_fields() -> None:
    a, b = Split.of(tp=4), Split.of(tp=4)
    assert not a < b and a <= b and not a > b and a >= b
    assert Split.of(tp=2) < Split.of(tp=4) and Split.of(tp=4) > Split.of(tp=2)


def test_pipeline_stages_hold_the_ends() -> None:
    # vLLM / SGLang make_layers: rank 0 builds the embedding, the last rank the final norm and LM head
    # (PPMissingLayer elsewhere); 80 layers over 2 stages, 40 each
    first = PipelineStage(rank=0, size=2, start=0, end=40, model_layers=80)
    last = PipelineStage(rank=1, size=2, start=40, end=80, model_layers=80)
    assert (first.layers, last.layers) == (40, 40)
    assert (first.first, first.last, last.first, last.last) == (True, False, False, True)
    assert first.held == "layers 0-39 (40) + embedding"
    assert last.held == "layers 40-79 (40) + final norm + LM head"
    only = PipelineStage(rank=0, size=1, start=0, end=32, model_layers=32)
    assert str(only) == "stage 0 of 1: layers 0-31 (32) + embedding + final norm + LM head"
    middle = PipelineStage(rank=1, size=3, start=27, end=54, model_layers=80)
    assert (middle.first, middle.last, middle.held) == (False, False, "layers 27-53 (27)")


def test_weight_point_defaults_to_the_plain_split() -> None:
    # a point published for tp 1 alone: no DP attention, EP or PP
    assert WeightPoint(tp=1, bytes=1, source="s").split == Split(tp=1, attention=1, experts=1, pp=1)


def test_param_group_bytes_are_params_times_bytes_over_the_ways() -> None:
    # bf16 dense (2 B a param) on tp 1: 1,000 params → 2,000 B; ceil over 3 ways: 2,000 / 3 → 667
    dense = ParamGroup(name="dense", params=1000, bytes_per_param_num=2)
    assert dense.bytes_per_gpu(Split.of(tp=1)) == 2000
    assert dense.bytes_per_gpu(Split.of(tp=3)) == 667
    # fp8 with one fp32 scale per 128 x 128 block: 1 + 4 / 16,384 = 4,097 / 4,096 B a param; 2^20 params over
    # experts 8 (ep 8) and 2 stages: 2^20 × 4,097 / (4,096 × 8 × 2) = 256 × 4,097 / 16 = 65,552
    experts = ParamGroup(name="experts", params=2**20, bytes_per_param_num=4097, bytes_per_param_den=4096,
                         split="experts")  # fmt: skip
    assert experts.bytes_per_gpu(Split.of(tp=2, ep=8, pp=2)) == 65_552
    assert experts.layers_owned(61) == (0, 61)


def test_embeddings_are_whole_on_a_stage() -> None:
    # the embedding sits on the first stage only (make_layers above): pp does not divide it; the layers do
    emb = ParamGroup(name="embeddings", params=1000, bytes_per_param_num=2)
    layers = ParamGroup(name="layers", params=1000, bytes_per_param_num=2)
    assert emb.bytes_per_gpu(Split.of(tp=1, pp=2)) == 2000
    assert layers.bytes_per_gpu(Split.of(tp=1, pp=2)) == 1000


def test_in_dtype_casts_only_unquantized_groups() -> None:
    # float32 checkpoint (4 B) built in bf16 (2 B): a 4-byte group is cast, whether spelled 4/1 or 8/2
    for num, den in ((4, 1), (8, 2)):
        g = ParamGroup(name="dense", params=10, bytes_per_param_num=num, bytes_per_param_den=den).in_dtype(4, 2)
        assert (g.bytes_per_param_num, g.bytes_per_param_den) == (2, 1)
    # a bf16 group in that checkpoint (4/2 = 2 B) is not the checkpoint's dtype: kept
    kept = ParamGroup(name="mixed", params=10, bytes_per_param_num=4, bytes_per_param_den=2)
    assert kept.in_dtype(4, 2) is kept


def test_model_defaults_are_a_gqa_model_without_mla_or_indexer() -> None:
    m = _arch(**LLAMA_8B)
    assert not m.is_mla and not m.is_dsa and m.indexer is None
    # v_head_dim absent → the K head dim: 32 layers × 8 heads × (128 + 128) × 2 B = 131,072 B a token (bf16)
    assert m.attention == FullAttention(8, 128, 128, 32)
    att = m.layers[31].attention
    assert isinstance(att, FullAttention) and len(m.layers) * att.bytes_per_token(1, "bf16") == 131_072
    assert (m.full_indexer_layers, m.shared_indexer_layers, m.full_layer_ids) == (0, 0, ())
    assert m.checkpoint_dtype_bytes == 2 and m.index_kpool == 1 and m.index_topk_freq == 1


def test_absent_fields_read_as_absent() -> None:
    # a field a config leaves out is the model having none of it (0: the readers test `> 0` / `or`), except the
    # indexer's pooling and frequency, whose absence is 1 (SGLang dsa_layer_skips_topk: index_topk_freq <= 1 ->
    # every layer computes its top-k; GLM-5.3-Flash index_kpool 1 is no pooling), and the checkpoint dtype, bf16's 2
    m = _arch()
    dims = (m.kv_lora_rank, m.qk_rope_head_dim, m.num_attention_heads, m.num_kv_heads, m.head_dim, m.v_head_dim)
    assert dims == (0, 0, 0, 0, 0, 0)
    assert (m.index_head_dim, m.index_n_heads, m.index_topk, m.index_kpool, m.index_topk_freq) == (0, 0, 0, 1, 1)
    assert m.checkpoint_dtype_bytes == 2 and m.layers[0].attention == FullAttention(0, 0, 0, 0)


def test_v_head_dim_apart_from_head_dim() -> None:
    # XiaomiMiMo/MiMo-V2-Flash config.json: head_dim 192, v_head_dim 128
    m = _arch(num_attention_heads=64, num_kv_heads=4, head_dim=192, v_head_dim=128)
    assert m.attention == FullAttention(4, 192, 128, 64)


def test_mla_without_indexer_is_not_dsa() -> None:
    # SGLang is_deepseek_nsa / vLLM is_deepseek_mla with an indexer: DSA needs index_topk AND index_head_dim
    m = _arch(**DSV3)
    assert m.is_mla and not m.is_dsa and m.attention == MlaLatent(512, 64)
    assert m.kind_label == "MLA" and m.full_indexer_layers == 0 and m.shared_indexer_layers == 0
    assert not _arch(**DSV3, index_head_dim=128).is_dsa
    assert not _arch(**DSV3, index_topk=2048).is_dsa
    # the rope dims default to none: a latent of 512 alone is 512 × 2 B in bf16
    latent = _arch(num_layers=1, kv_lora_rank=512).attention
    assert isinstance(latent, MlaLatent) and latent.bytes_per_token(MlaLayout.BF16) == 1024
    # kv_lora_rank 1 is still MLA (> 0); top-k 1 and index head dim 1 are still an indexer
    assert _arch(kv_lora_rank=1).is_mla
    assert _arch(**DSV3, index_topk=1, index_head_dim=1).is_dsa


def test_dsa_layers_own_the_indexer_where_flagged() -> None:
    # DeepSeek-V3.2: index_head_dim 128, index_topk 2048; flags for 4 layers: 0 and 3 full, 1 and 2 shared,
    # a flag list shorter than the layers leaves the rest shared
    m = _arch(**{**DSV3, "num_layers": 5}, index_head_dim=128, index_topk=2048,
              indexer_full=(True, False, False, True))  # fmt: skip
    assert m.is_dsa and m.kind_label == "DSA"
    assert [layer.indexer is not None for layer in m.layers] == [True, False, False, True, False]
    assert (m.full_indexer_layers, m.shared_indexer_layers, m.full_layer_ids) == (2, 3, (0, 3))
    # one key: fp8 128 + one fp32 scale = 132 B a token, index_kpool 1 by default
    assert m.indexer == IndexerK(128, 1) and m.layers[0].indexer.bytes_per_token == 132  # type: ignore[union-attr]


def test_hybrid_counts_its_indexer_layers() -> None:
    # one MLA layer with its indexer, one without, one sliding-window layer (never a shared-indexer layer)
    mla, idx, sw = MlaLatent(512, 64), IndexerK(128), SlidingWindow(8, 64, 64, 64, window=128)
    m = _arch(num_layers=3, layers=(Layer(0, (mla, idx)), Layer(1, (mla,)), Layer(2, (sw,))))
    assert m.is_hybrid
    assert (m.full_indexer_layers, m.shared_indexer_layers, m.full_layer_ids) == (1, 1, (0,))


def test_mtp_weights_count_only_with_mtp() -> None:
    m = _arch(**LLAMA_8B, param_groups=(ParamGroup(name="dense", params=100, bytes_per_param_num=2),
                                         ParamGroup(name="mtp", params=10, bytes_per_param_num=2)))  # fmt: skip
    assert m.estimated_weights_per_gpu(Split.of(tp=1)) == 200
    assert m.estimated_weights_per_gpu(Split.of(tp=1), with_mtp=True) == 220


def test_measured_point_of_the_same_split() -> None:
    p8, p4 = WeightPoint(tp=8, bytes=8, source="a"), WeightPoint(tp=4, bytes=4, source="b")
    m = _arch(**LLAMA_8B, measured_weights=(p8, p4))
    assert m.measured_weights_for(Split.of(tp=4)) is p4
    assert m.measured_weights_for(Split.of(tp=8, ep=8)) is p8  # ep 8 on tp 8 is tp 8's split
    assert m.measured_weights_for(Split.of(tp=2)) is None


def test_a_2_byte_checkpoint_under_auto_is_left_as_is() -> None:
    # torch_dtype absent reads as the 2-byte bf16 default; --dtype auto builds in 2 bytes: nothing is cast, so an
    # fp8 group (1 B a param) is not "unquantized" and keeps its byte (kvplan.engines.model_dtype)
    m = _arch(**LLAMA_8B, param_groups=(ParamGroup(name="experts", params=100, bytes_per_param_num=1),))
    dep = load_deployment("glm-5.3-8xh200-sglang", ["engine=vllm", "tp=1", "gpus_per_node=1", "gpu=h100"])
    assert with_model_dtype(m, dep) is m
