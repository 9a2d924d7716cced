"""Every remedy is a `--set knob=value` the loader accepts, and the re-planned deployment admits the request
as asked (issue 9, item 3). Each scenario's numbers are derived in tests/plan/test_admit.py, test_vllm.py and
test_workspace.py; here the remedies are fed back through load_deployment exactly as the CLI prints them.
"""

from __future__ import annotations

import pytest

from kvplan.engines import plan_pool
from kvplan.models.deploy import KNOBS
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model
from kvplan.plan.admit import Request, admit

SGLANG, VLLM = "glm-5.3-8xh200-sglang", "glm-5.3-8xh200-vllm"
K, M = 1024, 1 << 20

SCENARIOS = [
    (SGLANG, (), Request(ctx_tokens=M)),  # pool: dcp 2
    (SGLANG, (), Request(ctx_tokens=600_000)),  # pool: mem_fraction_static
    (SGLANG, (), Request(ctx_tokens=128 * K, concurrent=8)),  # pool: dcp 2 (not "concurrent=4")
    (SGLANG, ("kv_cache_dtype=bf16",), Request(ctx_tokens=500_000)),  # kv_cache_dtype fp8_e4m3
    (SGLANG, ("context_length=128K",), Request(ctx_tokens=128 * K, gen_tokens=1)),  # context_length
    (SGLANG, ("max_running_requests=4096",), Request(ctx_tokens=8192)),  # workspace: max_running_requests
    (SGLANG, ("max_running_requests=2",), Request(ctx_tokens=8192, concurrent=3)),  # running requests: 3
    (VLLM, ("context_length=1M",), Request(ctx_tokens=M)),  # engine starts: dcp 4
    (VLLM, (), Request(ctx_tokens=512 * K, concurrent=2)),  # the 512K preset: dcp 2
    (VLLM, ("context_length=256K",), Request(ctx_tokens=128 * K, concurrent=8)),  # pool: dcp 2
    (VLLM, ("context_length=256K", "kv_cache_dtype=auto"), Request(ctx_tokens=256 * K, concurrent=2)),
    # more GPUs (issue 12, item 5; derived in tests/plan/test_remedies_gpus.py): the weights do not load on H100
    (SGLANG, ("gpu=H100",), Request(ctx_tokens=128 * K)),  # tp=16 nodes=2
    (VLLM, ("gpu=H100",), Request(ctx_tokens=128 * K)),  # tp=16 nodes=2 context_length=131072
    (SGLANG, ("model=llama-3.1-70b", "gpu=H100", "tp=1"), Request(ctx_tokens=8 * K)),  # tp=4
]


@pytest.mark.parametrize(("deploy", "sets", "req"), SCENARIOS)
def test_every_remedy_is_a_knob_that_admits(deploy: str, sets: tuple[str, ...], req: Request) -> None:
    dep = load_deployment(deploy, sets)
    arch = load_model(dep.model)
    a = admit(plan_pool(arch, dep), req)
    assert not a.admitted
    assert a.remedies, "each scenario has at least one remedy"
    for r in a.remedies:
        printed = r.sets  # what the report prints after each --set (a knob, with the nodes it needs)
        assert r.flags == " ".join(f"--set {s}" for s in printed)
        changed = {s.split("=", 1)[0] for s in printed}
        assert changed <= set(KNOBS)
        # the printed --set replaces the user's own --set of that knob (the CLI refuses a knob given twice)
        kept = tuple(s for s in sets if s.split("=", 1)[0] not in changed)
        fixed = plan_pool(arch, load_deployment(deploy, (*kept, *printed)))
        assert admit(fixed, req, remedies=False).admitted, printed
        assert fixed.logged_tokens == r.pool_tokens, printed
