"""The SGLang knobs ``disable_radix_cache`` and ``swa_eviction_interval`` (issue 23), beyond the SWA request cap
that tests/conformance/test_sglang_pool_configurator.py pins with SGLang's own figures.

Sources: the sglang 0.5.23 release wheel, ``sglang/srt/``: ``mem_cache/kv_cache_configurator.py``
``_calculate_mamba_ratio`` ("if get_memory().disable_radix_cache: return 1"), ``environ.py``
``SGLANG_SWA_EVICTION_INTERVAL = EnvInt(128)``, ``model_executor/pool_configurator.py`` ``compute_swa_request_cap``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kvplan.engines import plan_pool
from kvplan.engines.common import PoolPlan
from kvplan.errors import InputError
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model
from tests.engines.test_sglang_hybrid import _qwen3_next  # 12 full + 36 GDN layers, written by that test


def _plan(model: str, *sets: str) -> PoolPlan:
    base = ["engine=sglang", "engine_version=0.5.23", "gpu=h200", "tp=4", "weights_per_gpu=20GiB",
            "kv_cache_dtype=auto", "context_length=32768"]  # fmt: skip
    return plan_pool(load_model(model), load_deployment("glm-5.3-8xh200-sglang", [*base, *sets]))


def test_radix_cache_off_keeps_one_mamba_slot_a_request(tmp_path: Path) -> None:
    # _calculate_mamba_ratio: 1 with the radix cache disabled, else 3 + 2 extra-buffer tracking slots (Qwen3-Next)
    model = _qwen3_next(tmp_path)
    on, off = _plan(model), _plan(model, "disable_radix_cache=true")
    units = [next(pool for pool in p.pools if pool.unit == "slot").demands[0].units for p in (on, off)]
    assert units == [5, 1]
    # the same budget gives the same K (its golden: tests/engines/test_sglang_hybrid.py); resolve_max_num_reqs:
    # min(clamp(int(rows / 32,768 × 512), 2,048, 4,096), rows // 2, K // ratio), K // ratio the smallest here
    k = off.extras["max_mamba_cache_size"]
    assert k == on.extras["max_mamba_cache_size"] and k < 4096 < on.rows // 2
    assert (on.max_running_requests, off.max_running_requests) == (k // 5, k)


def test_eviction_interval_sets_the_window_a_request_keeps(tmp_path: Path) -> None:
    # compute_swa_request_cap / the prefill budget: a request keeps window + SGLANG_SWA_EVICTION_INTERVAL tokens
    spans = [
        next(pool for pool in _plan("gpt-oss-120b", *s).pools if "sliding" in pool.name).demands[0].window
        for s in ((), ("swa_eviction_interval=4",))
    ]
    assert spans == [128 + 128, 128 + 4]  # gpt-oss-120b sliding_window 128


@pytest.mark.parametrize("knob", ["disable_radix_cache=true", "swa_eviction_interval=4"])
def test_vllm_refuses_the_sglang_knobs(knob: str) -> None:
    with pytest.raises(InputError, match=f"{knob.split('=')[0]} is an SGLang knob; vLLM has none"):
        load_deployment("glm-5.3-8xh200-vllm", [knob])
