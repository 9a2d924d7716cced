"""Measured weights match on the effective split of the weights, not on the knobs (issue 9, item 2).

GLM-5.3's one measured point is TP8: 94.46 GiB per rank (vLLM recipes PR #893), int(94.46 × 2^30) =
101,425,652,695 B. The estimate at TP8, the preset's config tensors, is 95,228,613,120 B (88.69 GiB) before the
engine's load-time additions (93,470,472,204 B from the parameter groups before one path).
"""

from __future__ import annotations

import pytest

from kvplan.models.arch import ModelArch, Split
from tests.conftest import make_plan

MEASURED_TP8 = 101_425_652_695  # int(94.46 × 1,073,741,824)


def weights(**sets: object) -> tuple[int, str]:
    k = make_plan(**sets).knob("weights_per_gpu")
    return k.as_int(), k.origin


def test_measured_point_is_94_46_gib() -> None:
    assert int(94.46 * (1 << 30)) == MEASURED_TP8
    value, origin = weights()
    assert value == MEASURED_TP8
    assert origin.startswith("default: measured")


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
@pytest.mark.parametrize("sets", [{"ep": 8}, {"ep": 4}, {"dcp": 8}, {"dcp": 2, "ep": 8}])
def test_knobs_that_keep_the_split_keep_the_measured_point(engine: str, sets: dict[str, object]) -> None:
    # ep=8 on TP8: experts split max(8, 8) = 8 ways, as at ep 1 (EP splits whole experts, TP splits each one);
    # dcp shards the KV cache only. Before the fix, ep=8 fell back to the 93,470,472,204 B estimate and the
    # pool grew by 7.4 GiB of weights that are really there.
    k = make_plan(f"glm-5.3-8xh200-{engine}", **sets).knob("weights_per_gpu")
    assert k.value == MEASURED_TP8
    assert k.origin.startswith("default: measured (tp 8, attention 8, experts 8)")


def test_dp_attention_changes_the_attention_split(glm53: ModelArch) -> None:
    # DP attention 8 on TP8 replicates attention on every rank: attention tp = 8 / 8 = 1. The preset's weights are
    # its config's tensors (one path, kvplan.models.preset_weights): 95,228,613,120 B at TP8 without the engine's
    # additions (test_weights_published.test_known_gaps_pinned). What attention tp splits, per layer (fp8 with one
    # fp32 scale per 128×128 block): q_b_proj 16,384 × 2,048 + 128 × 16 × 4 = 33,562,624 B, kv_b_proj 28,672 × 512
    # + 224 × 4 × 4 = 14,683,648 B, o_proj 6,144 × 16,384 + 48 × 128 × 4 = 100,687,872 B -> 148,934,144 B × 78
    # layers = 11,616,863,232 B whole, of which a rank held 1/8; and embed_tokens (154,880 × 6,144 × 2 B =
    # 1,903,165,440 B, split over the attention ranks by sharding.shard). So the estimate grows by 7/8 of both:
    # 10,164,755,328 + 1,665,269,760 = 11,830,025,088 B (the parameter groups said 11,905,111,764 B before).
    value, origin = weights(dp_attention=8)
    assert origin.startswith("default: estimated")
    assert "attention 1, experts 8" in origin
    tp8 = glm53.estimated_weights_per_gpu(Split.of(tp=8))
    assert tp8 == 95_228_613_120
    dp8 = glm53.estimated_weights_per_gpu(Split.of(tp=8, dp_attention=8))
    assert dp8 - tp8 == (11_616_863_232 + 1_903_165_440) * 7 // 8 == 11_830_025_088
    assert value == glm53.estimated_weights_per_gpu(Split.of(tp=8, dp_attention=8), engine="sglang")


def test_pipeline_stages_split_the_layers(glm53: ModelArch) -> None:
    # tp 8 × pp 2 on two nodes: the layers are split over 2 stages, so TP8's measured point (one stage holds
    # every layer) does not apply.
    # Each stage loads its own layers (SGLang get_pp_indices: 78 over 2 -> layers 0-38 and 39-77; make_layers
    # builds PPMissingLayer for the rest), the embedding on the first stage, the LM head on the last. The binding
    # stage is 1 (its 39 layers are all MoE; stage 0 holds the 3 dense layers). The preset's weights are its
    # config's tensors (kvplan.models.preset_weights); per tensor group at tp 8, then the stage's share:
    #   embeddings         475,791,360 / 2      (untied: the head half) =    237,895,680
    #   attention        2,709,927,168 × 39/78  (layers 0-77)           =  1,354,963,584
    #   indexer            746,538,624 × 39/78                          =    373,269,312
    #   dense_mlp           84,955,392 × 0/3    (layers 0-2)            =              0
    #   shared experts     353,980,800 × 39/75  (layers 3-77)           =    184,070,016
    #   routed experts  90,619,084,800 × 39/75                          = 47,121,924,096
    #   router             236,006,400 × 39/75                          =    122,723,328
    #   norms                2,328,576 × 39/78                          =      1,164,288
    # = 49,396,010,304 B of checkpoint tensors, plus SGLang's load-time additions for the stage's 39 layers
    # (kvplan.models.additions, recomputed by the stage: test_pipeline_stages pins their per-layer rule).
    # Was (before issue 23): every layer group halved and the embeddings whole on a stage, 46,973,131,782 B.
    value, origin = weights(pp=2, nodes=2)
    assert origin.startswith("default: estimated")
    assert "stage 1 of 2: layers 39-77 (39) + final norm + LM head" in origin
    tensors = 237_895_680 + 1_354_963_584 + 373_269_312 + 0 + 184_070_016 + 47_121_924_096 + 122_723_328 + 1_164_288
    assert tensors == 49_396_010_304
    stage = next(g for g in glm53.param_groups if g.name == "engine_additions")
    whole = stage.bytes_on(Split.of(tp=8), engine="sglang", with_mtp=False)
    assert 0 < value - tensors < whole  # the additions of 39 of 78 layers


def test_split_of() -> None:
    # experts: max(tp, ep); attention: tp // dp_attention
    assert Split.of(tp=8, ep=8) == Split.of(tp=8) == Split(tp=8, attention=8, experts=8)
    assert Split.of(tp=8, dp_attention=2) == Split(tp=8, attention=4, experts=8)
    assert Split.of(tp=4, ep=8) == Split(tp=4, attention=4, experts=8)
