"""Which check an admitted request names as the tightest (``Admission.binding``).

vLLM sizes its workspace room from what its profiling run measured (the non-KV memory is taken out before the
KV cache is sized), so its workspace check has need == have by construction: a margin of 0 that never binds
unless the reservation leaves no KV cache at all. It must not be named the tightest constraint of an admitted
request (it was, on every vLLM plan: "tightest: workspace"). SGLang's workspace room is the slack left outside
its pool, a real margin that can bind.
"""

from __future__ import annotations

from kvplan.plan.admit import Admission, Request, admit
from tests.conftest import make_plan

K128 = 128 * 1024


def _admission(deploy: str) -> Admission:
    return admit(make_plan(deploy), Request(ctx_tokens=K128, concurrent=1))


def test_vllm_workspace_is_reserved_and_never_the_tightest() -> None:
    a = _admission("glm-5.3-8xh200-vllm")
    ws = next(c for c in a.checks if c.name == "workspace")
    # the profile reserves exactly what it measured: need == have, flagged as reserved
    assert ws.ok and ws.reserved and ws.need == ws.have
    assert a.admitted
    # the remaining sized checks: context 131,072 of context_length 524,288 (margin 0.75), the pool and
    # running requests (1 of max_num_seqs 1,024: margin 0.999); the least margin relative to have is the tightest
    others = [c for c in a.checks if c.unit and not c.reserved]
    expected = min(others, key=lambda c: (c.have - c.need) / max(c.have, 1))
    assert a.binding.name == expected.name != "workspace"


def test_sglang_workspace_is_a_real_margin() -> None:
    a = _admission("glm-5.3-8xh200-sglang")
    ws = next(c for c in a.checks if c.name == "workspace")
    assert not ws.reserved  # SGLang's room is the slack outside the pool: it can bind
