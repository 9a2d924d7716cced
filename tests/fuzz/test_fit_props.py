"""Property: every deployment `fit` proposes, written with --emit-deploy's YAML and re-planned through the loader
and admit, is admitted for every requirement (small search space: one GPU type, SGLang, up to 8 GPUs)."""

from __future__ import annotations

import tempfile
from functools import cache
from pathlib import Path

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from kvplan.engines import plan_pool
from kvplan.models.arch import ModelArch
from kvplan.models.deploy import Requirements
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model
from kvplan.models.gpus import find_gpu
from kvplan.plan.admit import Request, admit
from kvplan.plan.fit import FitQuery, fit
from kvplan.render.fit_report import deploy_yaml

CTX = (8 * 1024, 32 * 1024, 128 * 1024, 512 * 1024, 1 << 20)


@cache
def _arch(name: str) -> ModelArch:
    return load_model(name)


@settings(deadline=None, max_examples=15)
@given(
    model=st.sampled_from(["glm-5.3", "llama-3.1-8b"]),
    ctx=st.one_of(st.none(), st.sampled_from(CTX)),
    conc=st.lists(st.tuples(st.integers(1, 64), st.sampled_from(CTX)), max_size=2),
)
def test_every_proposal_is_admitted(model: str, ctx: int | None, conc: list[tuple[int, int]]) -> None:
    arch = _arch(model)
    ctx = ctx if ctx is None else min(ctx, arch.max_position_embeddings)
    conc = [(n, min(c, arch.max_position_embeddings)) for n, c in conc]
    assume(ctx is not None or conc)  # no requirement: nothing to propose
    req = Requirements(min_ctx_tokens=ctx, concurrency=tuple(conc))
    q = FitQuery(model_ref=model, gpus=(find_gpu("h200"),), engines=("sglang",), requirements=req, max_gpus=8,
                 mtp=(False,))  # fmt: skip
    f = fit(arch, q)
    if f.best is None:
        assert all(not o.ok for o in f.outcomes)
    assume(f.admitted)  # the case this is about: a proposal to re-plan (hypothesis fails if it never occurs)
    for o in f.admitted[:3]:
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "fit.yaml"
            path.write_text(deploy_yaml(o))
            dep = load_deployment(str(path))
        plan = plan_pool(arch, dep)
        assert plan.logged_tokens == o.plan.logged_tokens  # type: ignore[union-attr]
        if ctx is not None:
            assert admit(plan, Request(ctx_tokens=ctx), remedies=False).admitted
        for n, c in conc:
            assert admit(plan, Request(ctx_tokens=c, concurrent=n), remedies=False).admitted
