"""`fit` ranks by the low end of each candidate's pool band (issue 28 item 3): a candidate whose pool rests on an
estimated weights figure ranks below one whose weights are a measured point when its margin could be gone."""

from __future__ import annotations

from functools import cache

from kvplan.models.deploy import Requirements
from kvplan.models.from_hf import load_model
from kvplan.models.gpus import find_gpu
from kvplan.plan.fit import Fit, FitQuery, fit, layout

K = 1024


@cache
def _fit() -> Fit:
    q = FitQuery(
        model_ref="glm-5.3",
        gpus=(find_gpu("h200"),),
        engines=("vllm",),
        requirements=Requirements(min_ctx_tokens=1024 * K, concurrency=((4, 128 * K),)),
        max_gpus=8,
    )
    return fit(load_model("glm-5.3"), q)


def test_fit_ranks_by_the_low_end_of_the_band() -> None:
    ranked = {layout(o.deployment): o for o in _fit().admitted if o.gpus == 8}
    tp8, dpa2 = ranked["TP8 DCP8 · fp8"], ranked["TP8 DPA2 DCP8 · fp8"]
    # vLLM 0.33.0 on 8×H200, blocks of 64 tokens × dcp 8: 1M needs 1,048,576 / 512 = 2,048 blocks (the binding
    # check of both). TP8 DCP8: weights a measured point (vLLM recipes PR #893), 8,067 usable blocks -> headroom
    # (8,067 − 2,048) / 8,067 = 746,126 ppm; only non-KV is estimated: no vLLM 0.21+ case on Hopper/Blackwell, so
    # the family's widest, ERRORS[("vllm-v1", "*", "*")] = ±540,432 ppm of 6,364,856,320 B = ±3,439,772,030 B off
    # the available 27,852,520,897 B: 24,412,748,867 // 3,452,160 = 7,071 blocks, 7,070 usable at the low end:
    # (7,070 − 2,048) / 7,070 = 710,325 ppm.
    assert (tp8.plan and tp8.plan.usable_pages, tp8.headroom_ppm, tp8.low_headroom_ppm) == (8_067, 746_126, 710_325)
    # TP8 DPA2 DCP8: weights per tensor from config.json, DSA: ±59,769 ppm (weights_band.PER_TENSOR_DSA) of
    # 97,339,762,176 B = 5,817,900,245 B, + non-KV 6,364,856,320 × 540,432 ppm = 3,439,772,030 B off the available
    # 31,938,411,416 B: 22,680,739,141 // 3,452,160 B a block = 6,570 blocks, 6,569 usable (block 0 is null):
    # (6,569 − 2,048) / 6,569 = 688,232 ppm, below TP8 DCP8's, though its point (9,250 usable) is 778,594.
    assert (dpa2.plan and dpa2.plan.usable_pages, dpa2.headroom_ppm, dpa2.low_headroom_ppm) == (9_250, 778_594, 688_232)
    best = _fit().best
    assert best is not None and layout(best.deployment) == "TP8 DCP8 · fp8"  # before: TP8 DPA2 DCP8 (the point)


def test_the_frontier_is_in_low_end_order() -> None:
    lows = [o.low_headroom_ppm for o in _fit().admitted if o.gpus == 8 and o.ok_at_low_end]
    assert lows == sorted(lows, reverse=True) and len(lows) > 3
