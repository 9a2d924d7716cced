"""DeepSeek-V4-Flash's measured weights point (kvplan has no V4 parameter layout; vllm-project/vllm#41027)."""

from __future__ import annotations

from pathlib import Path

from kvplan.models.arch import Split
from kvplan.models.from_hf import load_model
from tests.conftest import make_plan

LOG = Path(__file__).parents[1] / "data" / "logs" / "field" / "weights-vllm-deepseek-v4-flash-h100-tp8-issue-41027.log"


def test_the_point_is_the_logged_figure() -> None:
    # 'Model loading took 20.06 GiB' on rank 0 of a tp 8 run: 20.06 × 2^30 = 21,539,260,989 B (int of the product)
    assert "Model loading took 20.06 GiB memory" in LOG.read_text(encoding="utf-8")
    arch = load_model("deepseek-v4-flash")
    point = arch.measured_weights_for(Split.of(tp=8))
    assert point is not None and point.bytes == int(20.06 * 2**30) == 21_539_260_989


def test_the_default_tp8_deployments_plan_v4_flash_with_it() -> None:
    # on both engines the weights line is the measured point, so admit needs no --set weights_per_gpu
    for deploy in ("glm-5.3-8xh200-sglang", "glm-5.3-8xh200-vllm"):
        p = make_plan(deploy, model="deepseek-v4-flash")
        assert p.knob("weights_per_gpu").as_int() == 21_539_260_989
        assert "41027" in p.knob("weights_per_gpu").origin


def test_another_layout_still_asks_for_the_weights() -> None:
    # tp 4 is not the measured split and V4 has no parameter layout: no estimate to fall back on
    assert load_model("deepseek-v4-flash").measured_weights_for(Split.of(tp=4)) is None
