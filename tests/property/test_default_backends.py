"""kvplan never picks a default attention backend that it then refuses (issue 23 item 9).

Every version row of both engines x every GPU class in the catalog x every model preset, with the engine's
defaults (kv_cache_dtype auto, page size and backend unset): the plan either builds, with the backend the engine's
own choice logic picks (kvplan.engines.sglang_defaults; vLLM's ``platforms/cuda.py`` priorities), or is refused for
a reason other than that default. The one place where the engine itself picks a backend that cannot run is named
as the engine's failure ("the engine does not start: SGLang V picks B by default"), and it is exactly:

- DeepSeek-V3.2 (DeepseekV32ForCausalLM) on SM12x: ``auto`` resolves to fp8_e4m3 (major >= 10,
  ``_dsa_kv_cache_dtype_default``) and ``_dsa_split_backend_resolution`` then sets both DSA backends to trtllm
  ("Blackwell FP8 defaults to trtllm"; the GLM-only flashinfer_sparse_mla arm needs GlmMoeDsaForCausalLM), whose
  TRT-LLM-gen kernels are SM100 only (sgl-project/sglang#24633: TllmGenFmhaRunner "Unsupported architecture" on
  an SM120 RTX PRO 6000).

GPUs are taken one per platform (vendor, SM, ROCm gfx arch): a backend's platform rule reads nothing else
(``Backend.runs_on``, ``platform_label``).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

import kvplan
from kvplan.engines import plan_pool
from kvplan.engines.backends import platform_label
from kvplan.errors import InputError
from kvplan.models.deploy import Gpu
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model
from kvplan.models.gpus import gpu_catalog
from kvplan.versions import SGLANG, VLLM, SglangRules, VllmRules

MODELS = {p.stem: load_model(p.stem) for p in sorted((Path(kvplan.__file__).parent / "configs/models").glob("*.yaml"))}


def _gpus() -> dict[str, Gpu]:
    out: dict[tuple[str, int, str], tuple[str, Gpu]] = {}
    for name, gpu in gpu_catalog().items():
        out.setdefault((gpu.vendor, gpu.sm, platform_label(gpu)), (name, gpu))
    return dict(out.values())


GPUS = _gpus()


def _version(row: SglangRules | VllmRules) -> str:
    """The first version of the row, as a user would write it (a post-release where the row starts at one)."""
    v = ".".join(map(str, row.since))
    return v + (f".post{row.since_post}" if row.since_post >= 0 else "")


ROWS = [(e, r) for e, rows in (("sglang", SGLANG), ("vllm", VLLM)) for r in rows if r.modelled]


def _engine_own_failure(engine: str, model: str, gpu: Gpu, msg: str) -> bool:
    """The one case (module doc) where the engine's own default does not run."""
    return (
        engine == "sglang"
        and MODELS[model].architecture == "DeepseekV32ForCausalLM"
        and gpu.vendor == "nvidia"
        and gpu.sm // 10 == 12
        and msg.startswith("the engine does not start: SGLang ")
        and " picks trtllm by default (fp8 on SM12" in msg
    )


def test_the_catalog_covers_every_platform_rule() -> None:
    # Hopper, SM10x, SM12x, Ampere / Ada and both ROCm generations are all in the walk
    kinds = {(g.vendor, g.sm // 10) for g in GPUS.values() if g.vendor == "nvidia"}
    assert {("nvidia", 8), ("nvidia", 9), ("nvidia", 10), ("nvidia", 12)} <= kinds
    assert {"gfx942 (ROCm)", "gfx950 (ROCm)"} <= {platform_label(g) for g in GPUS.values()}


@pytest.mark.parametrize(("engine", "row"), ROWS, ids=[f"{e}-{r.label}" for e, r in ROWS])
def test_a_default_backend_is_one_the_plan_accepts(engine: str, row: SglangRules | VllmRules) -> None:
    version = _version(row)
    own_failures = 0
    for gname, gpu in GPUS.items():
        dep = load_deployment(
            f"glm-5.3-8xh200-{engine}",
            [f"engine_version={version}", f"gpu={gname}", "kv_cache_dtype=auto", "page_size=default"],
        )
        for name, arch in MODELS.items():
            try:
                p = plan_pool(arch, replace(dep, model=name))
            except InputError as e:
                msg = str(e)
                if _engine_own_failure(engine, name, gpu, msg):
                    own_failures += 1
                    continue
                # kvplan refusing a backend it chose itself, or the engine "picking" one outside the known case
                assert "attention_backend '" not in msg and " by default (" not in msg, (version, gname, name, msg)
                continue
            knobs = [k for k in p.knobs if k.name == "attention_backend"]  # V0 vLLM plans name no backend
            assert all(k.defaulted for k in knobs), (version, gname, name)
    sm12 = sum(1 for g in GPUS.values() if g.vendor == "nvidia" and g.sm // 10 == 12)
    # DeepSeek-V3.2 on each SM12x class, in the SGLang versions that serve DSA
    assert own_failures == (sm12 if engine == "sglang" and isinstance(row, SglangRules) and row.dsa else 0)
