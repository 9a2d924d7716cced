"""PoolPlan.startup_error is set whenever the engine would refuse to start (issue 9, item 7, engine side)."""

from __future__ import annotations

import pytest

from kvplan.errors import PlanError
from kvplan.plan.admit import Request, admit
from tests.conftest import make_plan

SGLANG, VLLM = "glm-5.3-8xh200-sglang", "glm-5.3-8xh200-vllm"


@pytest.mark.parametrize(("deploy", "word"), [(SGLANG, "context_length"), (VLLM, "max_model_len")])
def test_a_context_above_the_model_does_not_start(deploy: str, word: str) -> None:
    # GLM-5.3 max_position_embeddings = 1,048,576; both engines refuse a longer context while building the model
    # config, before any memory is profiled (SGLang: SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN, vLLM:
    # VLLM_ALLOW_LONG_MAX_MODEL_LEN). Before: SGLang planned a 2M context with no error.
    p = make_plan(deploy, context_length="2M")
    assert p.startup_error is not None
    assert p.startup_error.startswith(f"User-specified {word} (2097152) is greater than the derived {word}")
    a = admit(p, Request(ctx_tokens=8192))
    assert not a.admitted and a.binding.name == "engine starts"


def test_sglang_dcp_needs_eagle_topk_1() -> None:
    # _dsa_dcp_overrides (model_overrides/deepseek_v2.py): DSA DCP rejects speculative_eagle_topk != 1
    with pytest.raises(PlanError, match="speculative_eagle_topk 2"):
        make_plan(dcp=2, speculative_num_draft_tokens=3, speculative_eagle_topk=2)
    assert make_plan(dcp=2, speculative_num_draft_tokens=3, speculative_eagle_topk=1).startup_error is None


@pytest.mark.parametrize("deploy", [SGLANG, VLLM])
def test_the_presets_start(deploy: str) -> None:
    # both shipped presets start: SGLang 567,616 tokens (test_sglang), vLLM 536,832 at 512K (test_vllm)
    assert make_plan(deploy).startup_error is None
