"""Speculative decoding (MTP / NEXTN) on GLM-5.3-Flash with SGLang 0.5.23 (issue 13), derived from the wheel's
source (rules cited in kvplan/engines/sglang_hybrid.py), on top of tests/engines/test_sglang_glm5_next.py's plan
(H200, TP8, fp8_e4m3, page 256, KDA state 18,452,480 B a request over 34 layers, cell 528 × 11 + 33 × 11).

With --speculative-num-draft-tokens D = 4 (the GLM recipes' steps 3, top-k 1, draft 4):
- the target config names num_nextn_predict_layers 1, so ``spec_aux_hidden_state`` sets eagle_draft_num_layers 1
  and ``DefaultPoolConfigurator`` adds the draft to cell_size: int(528 × 11 × 1 / 11) = 528 B + its indexer
  ceil(132 / 4) = 33 B on every draft layer (``allocate_all_layers=True``): cell 6,171 + 561 = 6,732 B;
- max_running_requests 48 (``_handle_eagle_family``), mem_fraction_static still 0.886 (the memory hook runs first);
- ``_handle_max_mamba_cache``: K = int((rest × 0.9 / 1.9 × 2^30 − per_req × 5) // (per_req × 1.8));
  rest −= per_req × (min(48, K // 5) + 1) × 4 / 2^30; rest −= (K + 1) × per_req / 2^30;
- KDA keeps the dense conv windows (``conv_window_dedup_enabled`` is False for KDA): intermediate conv
  34 × 49 × 4 × (3 × 1,024 × 3) × 2 B, intermediate SSM 34 × 49 × 4 × (8 × 128 × 128 × 4 B).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from kvplan.engines import plan_pool
from kvplan.engines.common import PoolPlan, weight_split
from kvplan.errors import PlanError
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model
from kvplan.plan.admit import Request, admit

GiB = 1 << 30
PER = 18_452_480
PRE = 150_109_945_856 - GiB  # CUDA total − 1 GiB runtime overhead
SLACK = 16_990_127_259  # int(PRE × (1 − 0.886)), test_sglang_glm5_next.py


@pytest.fixture(scope="module")
def plan() -> PoolPlan:
    return plan_pool(load_model("glm-5.3-flash"), load_deployment("glm-5.3-8xh200-sglang",
                                                                  ["speculative_num_draft_tokens=4"]))  # fmt: skip


def test_cell_takes_the_nextn_layer(plan: PoolPlan) -> None:
    assert (plan.cell.draft_main_bytes, plan.cell.draft_indexer_bytes) == (528 * 11 * 1 // 11, 33)
    assert plan.cell.total_bytes == 528 * 11 + 33 * 11 + 528 + 33 == 6_732
    assert plan.draft_layers == 1


def test_pools_golden(plan: PoolPlan) -> None:
    arch, dep = load_model("glm-5.3-flash"), plan.deployment
    w = arch.estimated_weights_per_gpu(weight_split(dep), with_mtp=True, engine="sglang")
    assert w > 40_612_166_968 == arch.estimated_weights_per_gpu(weight_split(dep), engine="sglang")  # + the MTP layer
    assert plan.knob("weights_per_gpu").as_int() == w
    rest = (PRE - w - SLACK) / GiB
    k = int((rest * 0.9 / 1.9 * GiB - PER * 5) // (PER * 1.8))
    capped = min(48, k // 5)
    rest -= PER * (capped + 1) * 4 / GiB
    rest -= (k + 1) * PER / GiB
    available = int(rest * GiB)
    assert (k, capped) == (plan.extras["max_mamba_cache_size"], 48) == (1_287, 48)  # 2,346 without MTP
    assert abs(plan.available_bytes - available) <= 1
    rows = available // 6_732 // 256 * 256
    assert plan.rows == rows == 9_374_976
    ssm = 34 * 49 * 4 * 8 * 128 * 128 * 4
    conv = 34 * 49 * 4 * 3 * 1_024 * 3 * 2
    assert plan.extras["mamba_alloc_bytes"] == (k + 1) * PER + ssm + conv
    # the draft's DSA rows: (rows + 256) × 528 B + ((rows + 256 + 1) // 256 pages) × 256 × 33 B
    assert plan.extras["draft_alloc_bytes"] == (rows + 256) * 528 + (rows + 257) // 256 * 256 * 33
    assert plan.knob("max_running_requests").as_int() == 48
    assert any("2 × 50 requests × 8 × 128 × 2 B × 12 indexer layers" in n for n in plan.notes)


def test_128k_admits_48_at_once(plan: PoolPlan) -> None:
    r = admit(plan, Request(ctx_tokens=131_072))
    # 36,621 pages // 512 = 71 by token pages, 1,287 // 5 = 257 by state slots: the 48 running requests bind
    assert plan.usable_pages // 512 == 71
    assert r.admitted and r.max_concurrent == 48


# --------------------------------------------------------------------------- vLLM 0.33.0 (glm5_next_mtp)
#
# On tests/engines/test_vllm_glm5_next.py's plan (FLASHINFER_MLA_SPARSE_SM90 raw fp8 rows of 512 B, tp 8), with
# num_speculative_tokens S = 1:
# - the MTP decoder layer (``common/mtp.py``, ``is_mtp_layer=True``: MLA, never KDA) adds an MLA page, an indexer
#   page and a tail ring: 11 + 1 = 12 of each;
# - KDA page: conv (3 + S) × 3,072 × 2 + 8 × 128 × 128 × 4 = 24,576 + 524,288 = 548,864 B (``Glm5NextLinearAttention``
#   is a GatedDeltaNetAttention: num_spec = num_speculative_tokens); block 128 × cdiv(548,864, 128 × 512) = 1,152;
# - ring: 4 × next_power_of_2(cdiv(4 + S, 4)) = 8 slots × [K, gate] × 128 × 2 B = 4,096 B;
# - packed groups: repeats = _approximate_gcd([34, 12, 12], 12) = 12; the MLA + indexer group 12 × (589,824 + 38,016)
#   = 7,534,080 B; KDA max(cdiv(34, 12), cdiv(34, 7,534,080 // 589,824 = 12)) = 3 groups; the ring 1 group;
#   a block id round_up(7,534,080, 16,896) = 446 × 16,896 = 7,535,616 B;
# - a request: cdiv(tokens, 1,152) + 3 KDA groups × (2 + 1 checkpoint + S) + 1 ring block.


@pytest.fixture(scope="module")
def vplan() -> PoolPlan:
    dep = load_deployment("glm-5.3-8xh200-vllm", ["speculative_num_draft_tokens=1"])
    return plan_pool(load_model("glm-5.3-flash"), dep)


def test_vllm_groups_golden(vplan: PoolPlan) -> None:
    from kvplan.engines.vllm_hybrid import approximate_gcd

    assert vplan.extras["state_bytes"] == 4 * 3_072 * 2 + 8 * 128 * 128 * 4 == 548_864
    assert vplan.page_tokens == 128 * -(-548_864 // (128 * 512)) == 1_152
    assert approximate_gcd([34, 12, 12], 12) == 12
    assert vplan.extras["kv_cache_groups"] == 1 + 3 + 1
    assert vplan.extras["bytes_per_block"] == -(-(12 * (589_824 + 38_016)) // 16_896) * 16_896 == 7_535_616
    assert any("1 tail ring group of 12 × 4,096 B" in n for n in vplan.notes)


def test_vllm_blocks_and_128k(vplan: PoolPlan) -> None:
    num_blocks = vplan.available_bytes // 7_535_616
    assert vplan.extras["num_blocks"] == num_blocks
    # max_model_len 524,288: cdiv(524,288, 1,152) = 456 + 3 × 4 + 1 = 469 blocks a request
    assert vplan.extras["blocks_per_request"] == 456 + 12 + 1
    assert vplan.logged_tokens == int(num_blocks / 469 * 524_288)
    r = admit(vplan, Request(ctx_tokens=131_072))
    # cdiv(131,072, 1,152) = 114 + 12 + 1 = 127 blocks a request, block 0 the null block
    assert r.admitted and r.max_concurrent == (num_blocks - 1) // 127


# --------------------------------------------------------------------------- a config.json naming neither key


def _unnamed(tmp_path: Path) -> str:
    """The preset's config.json less text_config's num_nextn_predict_layers and q_lora_rank."""
    doc = yaml.safe_load(Path("kvplan/configs/models/glm-5.3-flash.yaml").read_text())
    for key in ("num_nextn_predict_layers", "q_lora_rank"):
        del doc["config"]["text_config"][key]
    (tmp_path / "config.json").write_text(json.dumps(doc["config"]))
    return str(tmp_path)


def test_sglang_takes_the_config_class_nextn_layer(tmp_path: Path) -> None:
    # SGLang 0.5.23 srt/configs/glm5_next.py Glm5NextTextConfig(num_nextn_predict_layers=1): the target config
    # still names one NextN layer, so spec_aux_hidden_state sets eagle_draft_num_layers 1 and the cell takes the
    # draft, 528 + 33 B, as test_cell_takes_the_nextn_layer's: 6,171 + 561 = 6,732 B (a default of 0 left it 6,171)
    arch = load_model(_unnamed(tmp_path))
    assert (arch.num_mtp_layers, arch.mtp_layers_named) == (1, False)
    dep = load_deployment("glm-5.3-8xh200-sglang", ["speculative_num_draft_tokens=4"])
    p = plan_pool(arch, dep)
    assert (p.cell.total_bytes, p.draft_layers) == (6_732, 1)


def test_vllm_cannot_draft_without_the_key(tmp_path: Path) -> None:
    # vLLM 0.33.0 reads the config through transformers (>=5.16.1, <5.21: Glm5NextTextConfig, no
    # num_nextn_predict_layers field); config/speculative.py hf_config_override: n_predict =
    # text_config.num_nextn_predict_layers raises AttributeError for method mtp. Without speculative decoding the
    # plan is the preset's: block 128 × cdiv(542,720 KDA state B, 128 × 512 B) = 128 × 9 = 1,152 (test_vllm_glm5_next)
    arch = load_model(_unnamed(tmp_path))
    with pytest.raises(PlanError) as e:
        plan_pool(arch, load_deployment("glm-5.3-8xh200-vllm", ["speculative_num_draft_tokens=1"]))
    assert str(e.value).startswith(
        "vLLM refuses it: AttributeError: 'Glm5NextTextConfig' object has no attribute 'num_nextn_predict_layers'"
    )
    assert plan_pool(arch, load_deployment("glm-5.3-8xh200-vllm")).page_tokens == 1_152
