"""Measured weights match on the effective split of the weights, not on the knobs (issue 9, item 2).

GLM-5.3's one measured point is TP8: 94.46 GiB per rank (vLLM recipes PR #893), int(94.46 × 2^30) =
101,425,652,695 B. The estimate from the parameter groups at TP8 is 93,470,472,204 B (87.05 GiB).
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
    # DP attention 8 on TP8 replicates attention on every rank: attention tp = 8 / 8 = 1.
    # attention params 13,602,521,088 × (16,384 + 4) / 16,384 B (fp8 with one fp32 scale per 128×128 block)
    #   = 13,605,842,016 B whole, cdiv(13,605,842,016, 8) = 1,700,730,252 B at attention tp 8.
    # So the estimate grows by 13,605,842,016 − 1,700,730,252 = 11,905,111,764 B over TP8's estimate.
    value, origin = weights(dp_attention=8)
    assert origin.startswith("default: estimated")
    assert "attention 1, experts 8" in origin
    tp8 = glm53.estimated_weights_per_gpu(Split.of(tp=8))
    assert tp8 == 93_470_472_204
    assert value - tp8 == 13_605_842_016 - 1_700_730_252 == 11_905_111_764


def test_pipeline_stages_split_the_layers() -> None:
    # tp 8 × pp 2 on two nodes: the layers are split over 2 stages, so TP8's measured point (one stage holds
    # every layer) does not apply.
    # Each stage loads its own layers (SGLang get_pp_indices: 78 over 2 -> layers 0-38 and 39-77; make_layers
    # builds PPMissingLayer for the rest), the embedding on the first stage, the LM head on the last. The binding
    # stage is 1 (its 39 layers are all MoE; stage 0 holds the 3 dense layers). Per group at tp 8, then its share:
    #   attention       1,700,730,252 × 39/78 (layers 0-77)           =    850,365,126
    #   dense_mlp          84,955,392 × 0/3   (layers 0-2)            =              0
    #   routed experts 90,619,084,800 × 39/75 (layers 3-77)           = 47,121,924,096
    #   shared experts    353,980,800 × 39/75                         =    184,070,016
    #   router            235,929,600 × 39/75                         =    122,683,392
    #   embeddings        475,791,360 / 2     (untied: the head half) =    237,895,680
    #   total                                                         = 48,516,938,310
    # Was (before issue 23): every layer group halved and the embeddings whole on a stage, 46,973,131,782 B.
    value, origin = weights(pp=2, nodes=2)
    assert origin.startswith("default: estimated")
    assert "stage 1 of 2: layers 39-77 (39) + final norm + LM head" in origin
    assert value == 850_365_126 + 0 + 47_121_924_096 + 184_070_016 + 122_683_392 + 237_895_680 == 48_516_938_310


def test_split_of() -> None:
    # experts: max(tp, ep); attention: tp // dp_attention
    assert Split.of(tp=8, ep=8) == Split.of(tp=8) == Split(tp=8, attention=8, experts=8)
    assert Split.of(tp=8, dp_attention=2) == Split(tp=8, attention=4, experts=8)
    assert Split.of(tp=4, ep=8) == Split(tp=4, attention=4, experts=8)
