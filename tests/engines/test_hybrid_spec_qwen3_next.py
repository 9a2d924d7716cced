"""Speculative decoding (MTP) on Qwen3-Next, both engines (issue 13): goldens derived from the engines' source
(each rule cited in kvplan/engines/sglang_hybrid.py and vllm_hybrid.py), the CLI verdicts, and properties.

Both deployments are the H200 × 8 TP8 presets with the fp8 KV cache and SGLang page 64 set as in
tests/cli/test_hybrid_presets_qwen3_next.py (its _admit: PRESET_KNOBS); a full-attention layer holds 1 kv head ×
(256 + 256) × 1 B = 512 B a token on one rank; 12 full layers + 36 Gated DeltaNet layers.

Weights with the MTP layer (loaded only with speculative decoding, kvplan/models/params_qwen3_next.py): the
20,059,645,504 B a GPU of the preset test + the ``mtp.*`` group's 1,650,471,424 bf16 parameters split 8 ways:
1,650,471,424 × 2 // 8 = 412,617,856 -> W = 20,472,263,360 B.

SGLang 0.5.23 (NEXTN = EAGLE, draft tokens D = 4 as the Qwen3-Next recipe's --speculative-num-draft-tokens 4):
- max_running_requests: 48 when not given (``arg_groups/speculative_hook.py`` ``_handle_eagle_family``), resolved
  after the memory hook, so mem_fraction_static stays 0.893 (reserved 15,312 MiB, no speculative term);
- ``_handle_max_mamba_cache`` (auto, speculative): per_req = 36 × (3 × 1,024 × 2 + 4 × 128 × 128 × 4) =
  9,658,368 B; K = int((rest × 0.9 / 1.9 × 2^30 − per_req × (1 + D)) // (per_req × (1 + D / 5)));
  capped = min(max(1, max_running_requests), K // 5); rest −= per_req × (capped + 1) × D / 2^30;
  rest −= (K + 1) × per_req / 2^30;
- the token pool: cell 12 × 512 = 6,144 B (no draft term: the target config names no num_nextn_predict_layers,
  ``spec_aux_hidden_state._resolve_eagle_aux_hidden_state``); rows = available // 6,144 // 64 × 64;
- the draft worker's HybridLinearKVPool: ONE full-attention layer of (rows + 64) × 512 B, from the slack.

vLLM 0.33.0 (``--speculative-config '{"method": "qwen3_next_mtp", "num_speculative_tokens": 2}'``, S = 2):
- the MTP decoder layer's attention joins the full-attention layers: 12 + 1 = 13; group size min(13, 36) = 13
  (36 ≥ 1.5 × 13): 1 full-attention group + cdiv(36, 13) = 3 GDN groups (3 padding layers);
- the GDN state: conv (3 + S) × 1,024 × 2 + recurrent 4 × 128 × 128 × 2 = 10,240 + 131,072 = 141,312 B;
  block = 64 × cdiv(141,312, 64 × 512) = 320 tokens; page 320 × 512 = 163,840 B; bytes per block 13 × 163,840 =
  2,129,920 B;
- a request takes cdiv(len, 320) full-attention blocks + 3 groups × (2 + 1 checkpoint + S = 5) state blocks.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.engines.sglang_hybrid import HybridSizer, mamba_cache_size, mamba_cache_size_spec
from kvplan.models.cache import LinearState
from tests.cli.test_hybrid_presets_qwen3_next import _admit, _check

runner = CliRunner(env={"KVPLAN_FORMAT": None})
GiB, MiB = 1 << 30, 1 << 20
MODEL = "qwen3-next-80b-a3b"
W_MTP = 20_059_645_504 + 1_650_471_424 * 2 // 8
PER_REQ = 36 * (3 * 1024 * 2 + 4 * 128 * 128 * 4)
PRE = 143_771 * MiB


def _sglang(running: int, d: int = 4) -> tuple[int, int, int, int]:
    """(K, capped requests, available bytes, rows) as ``_handle_max_mamba_cache`` with speculative decoding."""
    rest = (PRE - W_MTP) / GiB - PRE / GiB * (1 - 0.893)
    k = int((rest * 0.9 / 1.9 * GiB - PER_REQ * (1 + d)) // (PER_REQ * (1 + d / 5)))
    capped = min(max(1, running), k // 5)
    rest -= PER_REQ * (capped + 1) * d / GiB
    rest -= (k + 1) * PER_REQ / GiB
    available = int(rest * GiB)
    return k, capped, available, available // 6_144 // 64 * 64


SGL = ("--set", "pre_load_free=143771MiB", "--set", "speculative_num_draft_tokens=4")


def test_sglang_mtp_golden_bound_by_the_speculative_running_cap() -> None:
    k, capped, available, rows = _sglang(48)
    # 3,107 state slots (5,617 without speculative decoding: the joint solve gives each slot 1 + 4 / 5 of a state
    # and takes 1 + 4 states off the budget); the 48 running requests' intermediate states take 49 × 4 × per_req
    assert (k, capped, rows) == (3_107, 48, 13_385_472)
    data = _admit("--ctx", "128K", *SGL, code=0)
    plan = data["plan"]
    chain = {c["label"]: c["bytes"] for c in plan["chain"]}
    assert chain["weights per GPU"] == W_MTP  # the MTP layer is loaded
    assert plan["available_bytes"] == available
    assert plan["logged_tokens"] == rows
    assert plan["extras"]["max_mamba_cache_size"] == k
    assert chain["Mamba state pool"] == (k + 1) * PER_REQ
    assert chain["speculative state (reserved)"] == PER_REQ * 49 * 4 == 1_893_040_128
    # allocated: intermediate SSM 36 layers × 49 × 4 × (4 × 128 × 128 × 4 B) + deduplicated conv windows
    # 36 × 49 × (4 + 3 − 1) columns × 1,024 × 2 B (eagle top-k 1 on CUDA)
    spec_alloc = 36 * 49 * 4 * 262_144 + 36 * 49 * 6 * 1_024 * 2
    assert plan["extras"]["mamba_alloc_bytes"] == (k + 1) * PER_REQ + spec_alloc
    # the draft worker's one-layer pool over the same rows, from the slack
    assert plan["extras"]["draft_alloc_bytes"] == chain["MTP draft KV pool"] == (rows + 64) * 512 == 6_853_394_432
    # 128K: 2,048 pages of 209,148 (102 requests), 5 slots of 3,107 (621), but 48 running requests
    assert (rows // 64 // 2_048, k // 5) == (102, 621)
    assert _check(data, "running requests")["have"] == 48
    assert data["max_concurrent"] == 48
    mrr = next(k for k in plan["knobs"] if k["name"] == "max_running_requests")
    assert mrr["origin"].startswith("default: 48 // dp with speculative decoding")
    # the reserve is SGLang's memory hook's, which runs before the speculative hook: decode graph bs stays 512
    assert next(k for k in plan["knobs"] if k["name"] == "cuda_graph_max_bs")["value"] == 512


def test_sglang_mtp_bound_by_token_pages_then_by_state_slots() -> None:
    k, capped, available, rows = _sglang(1_000)
    # --max-running-requests 1000: the intermediate states are reserved for min(1,000, 3,107 // 5 = 621) requests
    assert (k, capped, rows) == (3_107, 621, 9_782_464)
    data = _admit("--ctx", "128K", *SGL, "--set", "max_running_requests=1000", code=0)
    assert data["plan"]["available_bytes"] == available
    # 128K: 152,851 pages // 2,048 = 74 requests by token pages, 621 by state slots: token pages bind
    assert data["max_concurrent"] == rows // 64 // 2_048 == 74
    # 4K: 152,851 // 64 = 2,388 by pages, 621 by state slots: the state slots bind
    data = _admit("--ctx", "4K", *SGL, "--set", "max_running_requests=1000", code=0)
    assert rows // 64 // 64 == 2_388
    assert data["max_concurrent"] == k // 5 == 621


def test_sglang_spec_refused_on_other_hybrids_in_one_line() -> None:
    r = runner.invoke(app, ["admit", "--ctx", "4K", "--model", "kimi-linear-48b-a3b", "--set",
                            "speculative_num_draft_tokens=4"])  # fmt: skip
    assert r.exit_code == 2
    assert "has no draft for speculative decoding with Kimi-Linear" in r.stderr + r.stdout


VLLM = ("-d", "glm-5.3-8xh200-vllm", "--set", "context_length=262144", "--set", "speculative_num_draft_tokens=2")


def test_vllm_mtp_golden() -> None:
    data = _admit("--ctx", "128K", *VLLM, code=0)
    plan = data["plan"]
    chain = {c["label"]: c["bytes"] for c in plan["chain"]}
    assert chain["weights per GPU"] == W_MTP
    available = (
        chain["requested"] - W_MTP - chain["torch peak (profiling run)"] - chain["non-torch growth"]
        - chain["CUDA-graph estimate"]
    )  # fmt: skip
    assert plan["available_bytes"] == available
    state = 5 * 1_024 * 2 + 4 * 128 * 128 * 2
    block = 64 * math.ceil(state / (64 * 512))
    assert (state, block) == (141_312, 320)
    assert plan["extras"]["state_bytes"] == state
    assert (plan["extras"]["group_size"], plan["extras"]["kv_cache_groups"]) == (13, 4)
    assert plan["extras"]["bytes_per_block"] == 13 * block * 512 == 2_129_920
    num_blocks = available // 2_129_920
    assert plan["extras"]["num_blocks"] == num_blocks
    # 128K: cdiv(131,072, 320) = 410 full-attention blocks + 3 × 5 state blocks = 425
    pool = _check(data, "pool: vLLM block pool")
    assert (pool["need"], pool["have"]) == (410 + 15, num_blocks - 1)
    assert data["max_concurrent"] == (num_blocks - 1) // 425
    # "GPU KV cache size": int(num_blocks / (820 + 15) × 262,144)
    assert plan["extras"]["blocks_per_request"] == 835
    assert plan["logged_tokens"] == int(num_blocks / 835 * 262_144)
    assert any("num_speculative_tokens 2" in n for n in plan["notes"])


def test_vllm_spec_refused_on_other_hybrids_in_one_line() -> None:
    r = runner.invoke(app, ["admit", "--ctx", "4K", "--model", "kimi-linear-48b-a3b", "-d", "glm-5.3-8xh200-vllm",
                            "--set", "speculative_num_draft_tokens=2"])  # fmt: skip
    assert r.exit_code == 2
    # vLLM's own error (config/speculative.py SpeculativeConfig: kimi_linear is no MTP model type)
    assert "vLLM refuses it: NotImplementedError: Unsupported speculative method: 'mtp'" in r.stderr + r.stdout


@pytest.mark.parametrize(
    "args",
    [
        ("--set", "speculative_num_draft_tokens=4"),
        ("-d", "glm-5.3-8xh200-vllm", "--set", "context_length=262144", "--set", "speculative_num_draft_tokens=2"),
    ],
)
def test_admit_128k_with_mtp_is_a_verdict_on_both_engines(args: tuple[str, ...]) -> None:
    # was exit 2 ("kvplan does not yet plan speculative decoding ...") on both engines
    r = runner.invoke(app, ["admit", "--ctx", "128K", "--model", MODEL, *args])
    assert r.exit_code == 0, (r.stdout[-800:], r.stderr)
    assert "ADMITTED" in r.stdout and "speculative decoding" in r.stdout


def test_qwen3_next_has_the_engines_one_mtp_layer() -> None:
    from kvplan.models.from_hf import load_model

    # vLLM qwen3_next_mtp.py getattr(config, "num_nextn_predict_layers", 1); the config names none
    assert load_model(MODEL).num_mtp_layers == 1


# --------------------------------------------------------------------------- properties

GDN = LinearState("gated_deltanet", 32, 16, 128, 128, 4)


@given(
    rest=st.floats(min_value=1.0, max_value=200.0),
    d=st.integers(min_value=1, max_value=16),
    running=st.integers(min_value=1, max_value=4_096),
    tp=st.sampled_from([1, 2, 4, 8]),
)
def test_sglang_spec_state_takes_what_it_reserves(rest: float, d: int, running: int, tp: int) -> None:
    s = HybridSizer(full_layers=12, state=GDN, state_layers=36, slots_per_request=5, draft_tokens=d,
                    spec_running=running)  # fmt: skip
    per = s.state_bytes_per_request(tp)
    left, k, err = s.take_state(rest, tp)
    if err is not None:
        assert k <= 0 or "Not enough GPU memory" in err
    assume(err is None)  # the parts to add up (hypothesis fails if every draw is refused)
    # the parts add up: what is left + the slots + the speculative reserve = the rest (GiB floats, ≤ 1 KiB off)
    assert abs((rest - left) * GiB - ((k + 1) * per + s.spec_reserved_bytes(k, tp))) < 1024
    # a draft never raises the slots, and the reserve covers at most max_running_requests + 1 requests
    assert k <= mamba_cache_size(rest, per)
    assert k == mamba_cache_size_spec(rest, per, d, 5)
    assert s.spec_reserved_bytes(k, tp) <= per * (running + 1) * d
    # the allocated buffers (deduplicated conv windows) never exceed the reserve
    assert s.spec_alloc_bytes(k, tp) <= s.spec_reserved_bytes(k, tp)


@given(
    rest=st.floats(min_value=1.0, max_value=200.0),
    d=st.integers(min_value=0, max_value=16),
    running=st.integers(min_value=1, max_value=4_096),
)
def test_state_and_its_speculative_reserve_stay_within_the_mamba_budget(rest: float, d: int, running: int) -> None:
    # the joint solve: (K + 1) × per_req + per_req × (capped + 1) × D ≤ rest × 0.9 / 1.9 (capped ≤ K // 5). Not
    # monotone in D: a draft shrinks K (each slot carries 1 + D / 5 states) more than the 48 requests' reserve
    # grows, so the token pool may get MORE memory with speculative decoding on, as in SGLang
    s = HybridSizer(full_layers=12, state=GDN, state_layers=36, slots_per_request=5, draft_tokens=d,
                    spec_running=running)  # fmt: skip
    per = s.state_bytes_per_request(8)
    _, k, err = s.take_state(rest, 8)
    if err is None:
        assert (k + 1) * per + s.spec_reserved_bytes(k, 8) <= rest * 0.9 / 1.9 * GiB


def test_explicit_max_mamba_cache_size_still_reserves_the_speculative_state() -> None:
    # _handle_max_mamba_cache with --max-mamba-cache-size 100: K = 100 as given, and the intermediate state is
    # reserved for min(max(1, 48), 100 // 5 = 20) = 20 requests: rest −= per_req × (20 + 1) × 4 / 2^30, then
    # rest −= (100 + 1) × per_req / 2^30
    s = HybridSizer(full_layers=12, state=GDN, state_layers=36, slots_per_request=5, max_mamba_cache_size=100,
                    draft_tokens=4, spec_running=48)  # fmt: skip
    per = s.state_bytes_per_request(8)
    assert per == PER_REQ
    left, k, err = s.take_state(50.0, 8)
    assert (k, err, s.spec_requests(k)) == (100, None, 20)
    assert left == 50.0 - PER_REQ * 21 * 4 / GiB - 101 * PER_REQ / GiB
