"""DeepSeek-V4 on SGLang 0.5.23 (issue 13; kvplan/engines/sglang_hybrid.py ``plan_dsv4``): goldens derived from the
release wheel's ``DSV4PoolConfigurator`` (``sglang/srt/model_executor/pool_configurator.py``) and the presets'
configs (tests/data/hf/deepseek-v4-*/config.json).

Constants (each cited in sglang_hybrid.py): page 256 (model_overrides/deepseek_v4.py), swa_full_tokens_ratio 0.1,
max_running_requests 256 (deepseek_v4_hook.py), the V4 KV layout on SM90 (584 B a token, a page padded to a multiple
of 576 B), the indexer 128 + 4 = 132 B, compress states float32, rings c4 8 / c128 128 rows.

Per layer and page (``KVLayout.page_bytes``): SWA page of 256 = ceil(256 × 584 / 576) = 260 × 576 = 149,760 B;
C4 page of 256 / 4 = 64 tokens = ceil(37,376 / 576) = 65 × 576 = 37,440 B (585 B a compressed token) + 64 × 132
= 8,448 B of indexer keys: 45,888 B; C128 page of 2 = ceil(1,168 / 576) = 3 × 576 = 1,728 B (864 B a token).
C4 compress state a SWA page: 8 rows × (2 × 2 × 512 + 2 × 2 × 128) × 4 B = 8 × 10,240 = 81,920 B a C4 layer.

Flash (43 layers; ``compress_ratios[:43]`` = 0, 0, (4, 128) × 20, 4: 21 C4 and 20 C128 layers):
- SWA page = 149,760 × 43 + 81,920 × 21 = 6,439,680 + 1,720,320 = 8,160,000 B (31,875 B a token);
- full page = 45,888 × 21 + 1,728 × 20 = 963,648 + 34,560 = 998,208 B (3,899.25 B a token);
- bytes_per_full_token = 0.1 × 31,875 + 3,899.25 = 7,086.75;
- C128 state (fixed) = ceil(257 × 128 + 129, 128) × 128 = ceil(33,025 / 128) = 259 × 128 = 33,152 rows
  × 2 × 512 × 4 B × 20 layers = 2,715,811,840 B; one request's ring 128 × 4,096 × 20 = 10,485,760 B.
Pro (61 layers; 128, 128, (4, 128) × 29, 4: 30 C4 and 31 C128 layers):
- SWA page = 149,760 × 61 + 81,920 × 30 = 9,135,360 + 2,457,600 = 11,592,960 B (45,285 B a token);
- full page = 45,888 × 30 + 1,728 × 31 = 1,376,640 + 53,568 = 1,430,208 B (5,586.75 B a token);
- bytes_per_full_token = 4,528.5 + 5,586.75 = 10,115.25; C128 state 33,152 × 4,096 × 31 = 4,209,508,352 B.

Memory chain (tests/engines/test_sglang_hybrid.py): H200 TP8, pre-load free 143,771 MiB, weights 20 GiB, mfs 0.893
(V4 is an MHA model to SGLang: ``attention_arch = AttentionArch.MHA``, the non-MLA prefill-graph term):
rest = (143,771 MiB − 20 GiB) / GiB − 143,771 MiB / GiB × 0.107 = 105.37842089... GiB -> available
int(rest × 2^30) = 113,149,217,865 B.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.engines import plan_pool
from kvplan.engines.common import PoolPlan
from kvplan.engines.sglang_hybrid import Dsv4Shape, dsv4_pool_tokens, v4_page_bytes
from kvplan.errors import KvplanError
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model

RUNNER = CliRunner()
AVAILABLE = 113_149_217_865
FLASH = Dsv4Shape(layers=43, c4_layers=21, c128_layers=20, head_dim=512, index_head_dim=128, window=128)
PRO = Dsv4Shape(layers=61, c4_layers=30, c128_layers=31, head_dim=512, index_head_dim=128, window=128)


def _plan(model: str, **sets: object) -> PoolPlan:
    base = {"weights_per_gpu": "20GiB", "pre_load_free": "143771MiB", **sets}
    dep = load_deployment("glm-5.3-8xh200-sglang", [f"{k}={v}" for k, v in base.items()])
    return plan_pool(load_model(model), replace(dep, model=model))


def test_v4_layout_pages() -> None:
    assert (v4_page_bytes(256), v4_page_bytes(64), v4_page_bytes(2)) == (149_760, 37_440, 1_728)


@pytest.mark.parametrize(
    ("shape", "swa_page", "full_page", "per_token", "state"),
    [(FLASH, 8_160_000, 998_208, 7_086.75, 2_715_811_840), (PRO, 11_592_960, 1_430_208, 10_115.25, 4_209_508_352)],
)
def test_dsv4_shape_goldens(shape: Dsv4Shape, swa_page: int, full_page: int, per_token: float, state: int) -> None:
    assert shape.swa_page_bytes == swa_page
    assert shape.full_page_bytes == full_page
    assert shape.bytes_per_full_token(0.1) == per_token
    assert shape.c128_state_fixed_bytes(256) == state


def test_presets_read_as_the_shapes() -> None:
    """The layer counts above come from the presets' compress_ratios (first num_hidden_layers entries)."""
    for model, shape in (("deepseek-v4-flash", FLASH), ("deepseek-v4-pro", PRO)):
        p = _plan(model)
        assert p.pools[0].unit_bytes == shape.full_page_bytes
        assert p.pools[1].unit_bytes == shape.swa_page_bytes
        assert p.pools[2].unit_bytes == shape.c128_state_slot_bytes()


def test_flash_pools_golden() -> None:
    """full = int((113,149,217,865 − 2,715,811,840) / 7,086.75) = int(15,583,081.95) = 15,583,081 // 256 × 256
    = 15,582,976 (60,871 pages); swa = int(15,582,976 × 0.1) = 1,558,297 // 256 × 256 = 1,558,272 (6,087 pages);
    c4 = 15,582,976 // 4 = 3,895,744; c128 = 121,742; c4_state = 6,087 × 8 = 48,696."""
    p = _plan("deepseek-v4-flash")
    assert p.available_bytes == AVAILABLE
    assert dsv4_pool_tokens(AVAILABLE, FLASH, ratio=0.1, max_running_requests=256) == (15_582_976, 1_558_272)
    assert (p.rows, p.logged_tokens, p.extras["swa_tokens"]) == (15_582_976, 15_582_976, 1_558_272)
    assert [pool.capacity for pool in p.pools] == [60_871, 6_087, 256]
    assert (p.extras["c4_tokens"], p.extras["c128_tokens"], p.extras["c4_state_rows"]) == (3_895_744, 121_742, 48_696)
    assert p.max_running_requests == 256
    assert p.page_tokens == 256
    # allocated: 60,871 × 998,208 + 6,087 × 8,160,000 + 2,715,811,840 (mrr stays 256)
    assert p.allocated_bytes == 60_871 * 998_208 + 6_087 * 8_160_000 + 2_715_811_840
    assert p.allocated_bytes <= p.available_bytes
    assert p.startup_error is None


def test_pro_pools_golden() -> None:
    """full = int((113,149,217,865 − 4,209,508,352) / 10,115.25) = int(10,769,848.4) // 256 × 256 = 10,769,664
    (42,069 pages); swa = int(1,076,966.4) = 1,076,966 // 256 × 256 = 1,076,736 (4,206 pages)."""
    p = _plan("deepseek-v4-pro")
    assert (p.rows, p.extras["swa_tokens"]) == (10_769_664, 1_076_736)
    assert [pool.capacity for pool in p.pools] == [42_069, 4_206, 256]


def test_flash_128k_bound_by_token_pages() -> None:
    """128K = 131,072 tokens: 512 full pages, SWA min(131,072, 128 + 128) -> 1 page + 2 = 3 pages, 1 ring.
    Fits: full 60,871 // 512 = 118; SWA 6,087 // 3 = 2,029; C128 rings 256 // 1 = 256: the full pool binds."""
    p = _plan("deepseek-v4-flash")
    needs = [pool.need(131_072) for pool in p.pools]
    assert needs == [512, 3, 1]
    assert [pool.fits(131_072) for pool in p.pools] == [118, 2_029, 256]


def test_flash_short_requests_bound_by_state_slots() -> None:
    """4,096 tokens: 16 full pages (60,871 // 16 = 3,804), 3 SWA pages (2,029), 1 C128 ring (256): the rings
    (one per running request, max_running_requests 256) bind."""
    p = _plan("deepseek-v4-flash")
    assert [pool.fits(4_096) for pool in p.pools] == [3_804, 2_029, 256]
    assert min(pool.fits(4_096) for pool in p.pools) == p.pools[2].fits(4_096)


def test_explicit_max_running_requests_shrinks_the_state_pool() -> None:
    """max_running_requests 64 given: SGLang's mem-fraction heuristic sees it (the decode graph's max_bs
    min(512, 64): reserved 512 + 12,288 + 1,024 + 64 × 2 + 464 = 14,416 MiB, mfs round(129,355 / 143,771, 3)
    = 0.9), so available = int(((143,771 MiB − 20 GiB) / GiB − 143,771 MiB / GiB × 0.1) × 2^30) = 114,204,501,606;
    C128 state = ceil(65 × 128 + 129, 128) = 67 × 128 = 8,576 rows × 4,096 × 20 = 702,545,920 B; full =
    int((114,204,501,606 − 702,545,920) / 7,086.75) = int(16,016,080.1) // 256 × 256 = 16,015,872."""
    p = _plan("deepseek-v4-flash", max_running_requests=64)
    assert p.knob("mem_fraction_static").value == 0.9
    assert p.available_bytes == 114_204_501_606
    assert FLASH.c128_state_fixed_bytes(64) == 702_545_920
    assert p.rows == 16_015_872
    assert p.pools[2].capacity == 64 == p.max_running_requests


def test_page_size_forced_to_256_with_a_note() -> None:
    p = _plan("deepseek-v4-flash")  # the preset pins GLM-5.3's 64-token pages
    assert p.knob("page_size").value == 256
    assert any("page_size to 256" in n for n in p.notes)
    assert p.knob("attention_backend").value == "dsv4"


def test_swa_pool_floor_is_sglang_error() -> None:
    """ratio 0.00001: bytes_per_full_token = 0.31875 + 3,899.25; full ≈ 28.3M tokens; swa = int(283.x) // 256
    × 256 = 256 <= window 128 + page 256: validate_swa_pool_size refuses."""
    p = _plan("deepseek-v4-flash", swa_full_tokens_ratio=0.00001)
    assert p.extras["swa_tokens"] == 256
    assert p.startup_error is not None
    assert p.startup_error.startswith("SWA pool (256 tokens) cannot hold even one request")


@pytest.mark.parametrize(
    ("sets", "words"),
    [
        # speculative decoding is planned (tests/engines/test_hybrid_spec_deepseek_v4.py); past the C4 ring it is
        # refused
        ({"speculative_num_draft_tokens": 11}, "exceeds what the c4 compress state ring can keep resident"),
        ({"gpu": "b200"}, "V4.1 KV layout"),
        ({"engine_version": "0.5.9"}, "SGLang 0.5.23 only"),
    ],
)
def test_refused_with_one_line(sets: dict[str, object], words: str) -> None:
    with pytest.raises(KvplanError) as e:
        _plan("deepseek-v4-flash", **sets)
    assert words in str(e.value)
    assert "\n" not in str(e.value)


def test_kv_dtype_sglang_refuses() -> None:
    with pytest.raises(KvplanError, match="fp8_e5m2 is not supported for DeepseekV4ForCausalLM"):
        _plan("deepseek-v4-flash", kv_cache_dtype="fp8_e5m2")


@pytest.mark.parametrize(("model", "at_once", "logged"), [("deepseek-v4-flash", 118, 15_582_976),
                                                          ("deepseek-v4-pro", 82, 10_769_664)])  # fmt: skip
def test_admit_128k_cli(model: str, at_once: int, logged: int) -> None:
    """issue 13 "Done when": ``kvplan admit --ctx 128K --model <preset>`` on the default SGLang preset (weights
    given: the V4 presets count no parameters yet). At once: Flash 60,871 // 512 = 118 (above); Pro 42,069 // 512
    = 82 (SWA 4,206 // 3 = 1,402 and 256 rings do not bind)."""
    args = ["admit", "--ctx", "128K", "--model", model, "--set", "weights_per_gpu=20GiB", "--set",
            "pre_load_free=143771MiB", "--format", "json"]  # fmt: skip
    r = RUNNER.invoke(app, args)
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["admitted"] is True
    assert d["max_concurrent"] == at_once
    assert d["plan"]["logged_tokens"] == logged
    assert [n["units"] for n in d["need_by_pool"]] == [512, 3, 1]
