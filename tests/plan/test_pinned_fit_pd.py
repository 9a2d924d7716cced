"""plan/fit_pd.py pinned at what its mutants moved (scripts/mutate.py, issue 26): the SGLang staging buffer's
note names the plan's own reserve, the memory it is allocated out of."""

from __future__ import annotations

from types import SimpleNamespace as NS

from kvplan.plan.fit import Fit
from kvplan.plan.fit_pd import PdFit, pd_staging
from tests.plan.test_fit_pd_staging import _plan


def test_the_staging_note_names_the_reserve_it_comes_out_of() -> None:
    # SGLANG_DISAGG_STAGING_BUFFER=1 allocates after the pool (common/staging_handler.py init_staging_buffers), so
    # out of what the plan keeps beside weights and pool: the memory map's "reserve" row (activations, CUDA
    # graphs), not its weights or pool rows. Llama-3.1-70B, SGLang, TP2 fp8 on H200 (tests/plan/test_fit_pd_staging.py)
    plan = _plan("llama-3.1-70b", "sglang", 2, "fp8_e4m3")
    rows = {x.label: x.bytes for x in plan.memory_map}
    reserve = rows.pop("reserve")
    assert reserve > 0 and reserve not in rows.values()  # no other row's figure (weights, main KV, driver, the 0s)
    for side in ("prefill", "decode"):
        text = pd_staging(plan, side, None, sglang_staging=True).text
        assert f"out of the {reserve:,} B the plan keeps outside weights and pool" in text


def _side(gpus: int, headroom_ppm: int) -> Fit:
    return NS(best=NS(gpus=gpus, headroom_ppm=headroom_ppm))  # type: ignore[return-value]


def test_the_side_that_binds() -> None:
    # the side needing more GPUs binds; at equal GPUs the one with less headroom left; an exact tie names decode,
    # the side sized for every requirement (the prefill side for one request of the longest context)
    def binds(p: Fit, d: Fit) -> str | None:
        return PdFit(prefill=p, decode=d, longest_ctx=1, link="400Gbps").binds

    assert binds(_side(4, 0), _side(8, 900_000)) == "decode"
    assert binds(_side(8, 0), _side(4, 0)) == "prefill"
    assert binds(_side(4, 100_000), _side(4, 200_000)) == "prefill"
    assert binds(_side(4, 200_000), _side(4, 100_000)) == "decode"
    assert binds(_side(4, 100_000), _side(4, 100_000)) == "decode"
    assert binds(NS(best=None), _side(4, 0)) is None  # type: ignore[arg-type]
