"""kvplan/engines/sglang_allswa.py pinned (mutation check seed of README's row: 12 survivors of 26 with its
conformance tests).

Model and deployment as tests/engines/test_sglang_allswa.py: a GptOssForCausalLM config of 32 layers, all
``sliding_attention``, window 8, 4 kv heads × (64 + 64) × 2 B = 1,024 B a token a layer (32,768 B over the 32
layers), one GPU, a 10,000,000 B budget. sglang 0.5.23 wheel, srt/model_executor/pool_configurator.py:
- the all-SWA branch of ``HybridSWAPoolConfigurator``: cell = 32,768 B, swa_tokens = int(available // cell) //
  page × page (305 at page 1);
- ``compute_swa_request_cap``: a running request keeps window + SGLANG_SWA_EVICTION_INTERVAL (128 by default,
  ``environ.py``) tokens, + page (padding) + page (decode_alloc): two pages beyond the window span.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from kvplan.engines import plan_pool
from kvplan.engines.common import PoolPlan
from kvplan.engines.sglang_allswa import all_sliding, plan
from kvplan.errors import PlanError
from kvplan.models.arch import ModelArch
from kvplan.models.cache import Layer, SlidingWindow
from kvplan.models.deploy import Deployment
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model


def _inputs(tmp_path: Path, *sets: str) -> tuple[ModelArch, Deployment]:
    cfg = {"architectures": ["GptOssForCausalLM"], "num_hidden_layers": 32, "num_attention_heads": 4,
           "num_key_value_heads": 4, "head_dim": 64, "hidden_size": 256, "intermediate_size": 512, "vocab_size": 1000,
           "max_position_embeddings": 4096, "torch_dtype": "bfloat16", "num_local_experts": 4,
           "num_experts_per_tok": 2, "sliding_window": 8, "layer_types": ["sliding_attention"] * 32}  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    dep = tmp_path / "deploy.yaml"
    dep.write_text(
        'schema_version: 1\nname: allswa\nmodel: allswa\nengine: sglang\nengine_version: "0.5.23"\ngpu: h100\n'
        f"gpus_per_node: 1\ntp: 1\nmem_fraction_static: 1.0\nweights_per_gpu: 1GiB\npre_load_free: {10**7 + 2**30}B\n"
    )
    return load_model(str(tmp_path)), load_deployment(str(dep), list(sets))


def _plan(tmp_path: Path, *sets: str) -> PoolPlan:
    return plan_pool(*_inputs(tmp_path, *sets))


def test_a_request_keeps_its_window_the_eviction_interval_and_two_pages(tmp_path: Path) -> None:
    (demand,) = _plan(tmp_path).pools[0].demands
    assert (demand.window, demand.extra) == (8 + 128, 2)
    (demand,) = _plan(tmp_path, "swa_eviction_interval=4").pools[0].demands
    assert demand.window == 8 + 4


def test_a_page_of_the_pool_is_the_cell_times_the_page(tmp_path: Path) -> None:
    p = _plan(tmp_path, "page_size=128")
    assert p.pools[0].unit_bytes == 32_768 * 128  # 4,194,304 B a page of 128 rows
    assert p.pools[0].capacity == 2  # 305 // 128


def test_the_chain_says_the_swa_pool(tmp_path: Path) -> None:
    p = _plan(tmp_path)
    terms = {t.label: t for t in p.chain}
    assert terms["cell"].bytes == 32_768
    assert terms["cell"].detail == "bytes per SWA pool row (32 sliding layers, no ratio)"
    assert terms["pool rows per GPU"].detail == "305 = int(available // cell) // 1 × 1 (swa_layer_tokens)"


def test_dcp_is_refused_from_two(tmp_path: Path) -> None:
    with pytest.raises(PlanError, match="dcp 2 with an all-sliding-window model"):
        _plan(tmp_path, "tp=2", "gpus_per_node=2", "dcp=2")


def _with_layers(arch: ModelArch, windows: list[SlidingWindow]) -> ModelArch:
    return replace(arch, layers=tuple(Layer(i, (w,)) for i, w in enumerate(windows)))


def test_windows_of_two_shapes_are_refused(tmp_path: Path) -> None:
    arch, dep = _inputs(tmp_path)
    sw = arch.layers[0].caches[0]
    assert isinstance(sw, SlidingWindow)
    wide = replace(sw, window=16)
    with pytest.raises(PlanError, match="sliding-window layers of different shapes"):
        plan(_with_layers(arch, [sw] * 31 + [wide]), dep)
    assert plan(_with_layers(arch, [sw] * 32), dep).rows == 305  # one shape: planned


def test_windows_unlike_the_config_fields_are_refused(tmp_path: Path) -> None:
    # the window's heads differ from the config's num_key_value_heads (4): the uniform view would size other rows
    arch, dep = _inputs(tmp_path)
    sw = arch.layers[0].caches[0]
    assert isinstance(sw, SlidingWindow)
    with pytest.raises(PlanError, match="sliding-window layers unlike the config's fields"):
        plan(_with_layers(arch, [replace(sw, num_kv_heads=2)] * 32), dep)


def test_a_window_beside_another_cache_is_not_all_sliding(tmp_path: Path) -> None:
    # the all-SWA branch wants every layer's one cache to be its window: a layer that holds a second cache beside
    # it (here a second window) is not sized by that branch
    arch, _ = _inputs(tmp_path)
    sw = arch.layers[0].caches[0]
    assert isinstance(sw, SlidingWindow) and all_sliding(arch)
    mixed = replace(arch, layers=(*arch.layers[:-1], Layer(31, (sw, replace(sw, window=16)))))
    assert not all_sliding(mixed)
