"""Survivors of the sampled mutation check (scripts/mutate.py, issue 26) on kvplan/engines/sglang_hybrid.py, each
pinned by a figure from SGLang's source (0.5.23) or a field log."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from kvplan.engines import plan_pool
from kvplan.engines.sglang_hybrid import compress_state_write_pad, prefix_reuse_rules
from kvplan.errors import PlanError
from kvplan.models.arch import ModelArch
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model
from tests.engines.test_sglang_hybrid import _plan, _qwen3_next
from tests.engines.test_sglang_v4 import _plan as _v4_plan


def test_a_state_hit_names_the_track_interval(tmp_path: Path) -> None:
    # --mamba-track-interval defaults to 256 decode tokens (arg_groups/fields/exec_.py); a real SGLang start-up
    # prints it: server_args=ServerArgs(... mamba_track_interval=256 ...) in
    # tests/data/logs/field/sglang-kimi-k2.5-mi355x-ajith-sirra-amd-issues.log line 26
    (rule,) = prefix_reuse_rules(_plan(_qwen3_next(tmp_path), tp=4))
    assert "every 256 decode tokens" in rule


def test_the_c4_ring_serves_ten_draft_tokens_not_eleven() -> None:
    # deepseek_v4_memory_pool.py get_compress_state_write_pad: window = 4 × 2 = 8 for C4, the speculative ring 16
    # (get_compress_state_ring_size) serves 16 - 8 + 2 = 10 draft tokens; C128: 256 - 128 + 2 = 130; a ring no
    # wider than its window (the non-speculative 8 and 128) serves none
    assert (compress_state_write_pad(4, 16), compress_state_write_pad(128, 256)) == (10, 130)
    assert (compress_state_write_pad(4, 8), compress_state_write_pad(128, 128)) == (0, 0)
    # DSV4PoolConfigurator._assert_ring_serves_draft_tokens: 10 plan, 11 are refused naming the bound
    assert _v4_plan("deepseek-v4-flash", speculative_num_draft_tokens=10).rows > 0
    with pytest.raises(PlanError, match=r"ring_size=16 serves at most 10 draft tokens"):
        _v4_plan("deepseek-v4-flash", speculative_num_draft_tokens=11)


def test_v4_running_requests_reduced_to_half_the_rows() -> None:
    # kv_cache_configurator.py resolve_max_num_reqs: max_num_reqs = min(requested, token_capacity // 2)
    # (/work/shared/reference/sglang-0.5.23.md §5). DeepSeek-V4-Flash with 125,795 MiB of weights a GPU leaves
    # one 256-token page of rows: 256 // 2 = 128 < the 256 apply_deepseek_v4_defaults asks for
    p = _v4_plan("deepseek-v4-flash", weights_per_gpu="125795MiB")
    k = p.knob("max_running_requests")
    assert (p.rows, k.value) == (256, 128)
    assert k.origin.endswith("reduced to rows // 2 = 128")


# ---- fresh seed 62547 (issue 26): the sizer's inputs, the chain's order, the speculative notes

PER_TP2 = 36 * ((3 * 8_192 // 2) * 2 + 16 * 128 * 128 * 4)
"""Qwen3-Next's state a request on one rank of attention tp 2 (tp 4, dp_attention 2), SGLang ``Mamba2StateShape``:
conv (kernel 4 − 1) × conv_dim (2 × 16 × 128 + 32 × 128 = 8,192) / 2 bf16 + recurrent 32 / 2 heads × 128 × 128 fp32,
over 36 Gated DeltaNet layers: (24,576 + 1,048,576) × 36 = 38,633,472 B."""


def _one_shape_off(model: str, kind: str) -> ModelArch:
    """``model`` with one layer of ``kind`` given another shape (another window, twice the KV heads, one more conv
    tap): SGLang's hybrid pools hold one shape a kind (SWAKVPool one sliding_window_size, MambaPool one
    mamba_cache_per_req, one full-attention cell)."""
    arch = load_model(model)
    have = {"window": lambda c: c.window is not None, "state": lambda c: c.state is not None,
            "full": lambda c: c.window is None and c.state is None}[kind]  # fmt: skip
    i = next(i for i, layer in enumerate(arch.layers) if have(layer))
    c = arch.layers[i].caches[0]
    if kind == "window":
        off = replace(c, window=c.window + 128)
    elif kind == "state":
        off = replace(c, conv_kernel=c.conv_kernel + 1)
    else:
        off = replace(c, num_kv_heads=c.num_kv_heads * 2)
    layers = (
        *arch.layers[:i],
        replace(arch.layers[i], caches=(off, *arch.layers[i].caches[1:])),
        *arch.layers[i + 1 :],
    )
    return replace(arch, layers=layers)


@pytest.mark.parametrize("kind", ["window", "full", "state"])
def test_two_shapes_of_one_kind_are_refused(kind: str, tmp_path: Path) -> None:
    # gpt-oss-120b: 18 sliding (window 128) + 18 full layers of 8 KV heads × 64; Qwen3-Next: 36 Gated DeltaNet
    # layers of kernel 4. One layer of another shape makes two shapes of that kind (not three): refused, where the
    # unchanged model plans
    model = _qwen3_next(tmp_path) if kind == "state" else "gpt-oss-120b"
    sets = ["context_length=32768", "weights_per_gpu=20GiB"] + (["tp=4"] if kind == "state" else [])
    dep = replace(load_deployment("glm-5.3-8xh200-sglang", sets), model=model, kv_cache_dtype="auto", page_size=None)
    assert plan_pool(load_model(model), dep).rows > 0
    with pytest.raises(PlanError, match="layers of one kind with different shapes"):
        plan_pool(_one_shape_off(model, kind), dep)


def test_a_hybrid_of_one_linear_layer(tmp_path: Path) -> None:
    # Qwen3-Next's shape with 2 layers, every 2nd full: layer 0 Gated DeltaNet, layer 1 full attention; the one
    # state layer is the state pool's: 536,576 B a request at tp 4 (conv 3 × 2,048 × 2 + recurrent 8 × 128 × 128 × 4)
    cfg = json.loads(Path(_qwen3_next(tmp_path), "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**cfg, "num_hidden_layers": 2, "full_attention_interval": 2}))
    state = next(pool for pool in _plan(str(tmp_path), tp=4).pools if pool.unit == "slot")
    assert (state.name, state.unit_bytes) == ("mamba state (1 layers)", 3 * 2_048 * 2 + 8 * 128 * 128 * 4)


def test_a_given_state_pool_is_per_dp_worker(tmp_path: Path) -> None:
    # _handle_max_mamba_cache (kv_cache_configurator.py): "server_args.max_mamba_cache_size //
    # (dp_size if enable_dp_attention else 1)": 100 over dp_attention 2 → 50 slots a rank; resolve_max_num_reqs
    # caps the running requests at 50 // 5 = 10; the pool (50 + 1) × 38,633,472 B comes off before the token pool
    p = _plan(_qwen3_next(tmp_path), tp=4, dp_attention=2, max_mamba_cache_size=100)
    assert (p.extras["max_mamba_cache_size"], p.max_running_requests) == (50, 10)
    assert p.knob("max_mamba_cache_size").origin == "set, // dp_attention 2"
    assert next(t for t in p.chain if t.label == "Mamba state pool").bytes == 51 * PER_TP2 == 1_970_307_072
    # the state lines sit right before the KV budget they reduce (taken out of rest before the token pool is sized)
    labels = [t.label for t in p.chain]
    assert labels.index("Mamba state pool") + 1 == labels.index("available for the KV pool")


def test_one_running_request_over_two_dp_workers_is_one_each(tmp_path: Path) -> None:
    # --max-running-requests 1 over dp_attention 2: resolve_max_num_reqs max(1, 1 // 2) = 1 a worker, and
    # _handle_max_mamba_cache reserves the speculative state for min(max(1, 1 // 2), K // 5) = 1 request:
    # per_req × (1 + 1) × 4 draft tokens = 309,067,776 B
    p = _plan(_qwen3_next(tmp_path), tp=4, dp_attention=2, max_running_requests=1, speculative_num_draft_tokens=4)
    assert p.max_running_requests == 1
    assert next(t for t in p.chain if t.label == "speculative state (reserved)").bytes == PER_TP2 * 2 * 4


def test_dcp_2_with_a_hybrid_is_refused_and_dcp_1_plans() -> None:
    assert _plan("gpt-oss-120b", dcp=1).rows > 0
    with pytest.raises(PlanError, match="kvplan does not yet plan dcp 2 with a hybrid model"):
        _plan("gpt-oss-120b", dcp=2)


def test_each_speculative_note_on_its_own_draft(tmp_path: Path) -> None:
    # Qwen3-Next names no num_nextn_predict_layers: its draft pool is beyond the budget (_with_draft_pool), never
    # "in cell_size"; GLM-5.3-Flash's NextN layer is in cell_size, and its note says the state reservation with
    # KDA's dense conv windows (memory_pool.conv_window_dedup_enabled is False for KDA)
    qwen = _plan(_qwen3_next(tmp_path), tp=4, speculative_num_draft_tokens=4)
    assert not any("in cell_size" in n for n in qwen.notes)
    assert sum(n.startswith("speculative decoding (NEXTN / EAGLE, 4 draft tokens)") for n in qwen.notes) == 1
    glm = plan_pool(load_model("glm-5.3-flash"), load_deployment("glm-5.3-8xh200-sglang",
                                                                 ["speculative_num_draft_tokens=4"]))  # fmt: skip
    (note,) = (n for n in glm.notes if n.startswith("speculative decoding (NEXTN / EAGLE, 4 draft tokens)"))
    assert "1 NextN layer is in cell_size" in note
    assert note.endswith(
        "SGLang reserves 4 intermediate states per running request (intermediate_ssm_state_cache, "
        "intermediate_conv_window, dense: KDA or eagle top-k > 1) out of the Mamba budget before "
        "sizing max_mamba_cache_size (_handle_max_mamba_cache: K = int((budget − per_req × (1 + D)) "
        "// (per_req × (1 + D / mamba_ratio))))"
    )


def test_the_state_notes_name_the_slots(tmp_path: Path) -> None:
    # _calculate_mamba_ratio: Qwen3-Next is in _MAMBA_EXTRA_BUFFER_ARCHS, 3 + 2 tracking slots with the overlap
    # scheduler (get_mamba_tracking_slots); with the radix cache off, 1 slot a request
    model = _qwen3_next(tmp_path)
    (note,) = (n for n in _plan(model, tp=4).notes if n.startswith("Mamba state: "))
    assert note.startswith("Mamba state: 5 slots reserved per running request (3 + 2 extra-buffer tracking slots")
    off = _plan(model, tp=4, disable_radix_cache=True).notes
    assert "Mamba state: 1 slots reserved per running request" in off
    # with MTP the draft's notes end with the reserved intermediate state, Gated DeltaNet's conv windows shared
    # (conv_window_dedup_enabled: CUDA, eagle top-k 1)
    spec = _plan(model, tp=4, speculative_num_draft_tokens=4).notes
    assert (
        "speculative state: SGLang reserves 4 intermediate states per running request "
        "(intermediate_ssm_state_cache, intermediate_conv_window) out of the Mamba budget"
    ) in "\n".join(spec)


@pytest.mark.parametrize(("topk", "dense"), [(None, False), (1, False), (2, True)])
def test_conv_windows_are_shared_only_on_a_chain(tmp_path: Path, topk: int | None, dense: bool) -> None:
    # memory_pool.conv_window_dedup_enabled: on CUDA, for a non-KDA state with eagle top-k <= 1, the conv
    # intermediate is one (D + kernel − 2) = 4 + 2 = 6-column window a slot; else D × (kernel − 1) = 12 columns.
    # MambaPool's speculative buffers (36 layers × (reqs + 1) rows, D = 4): SSM 4 × 8 × 128 × 128 fp32 + conv
    # columns × conv_dim / tp 4 = 2,048 bf16
    sets = {"tp": 4, "speculative_num_draft_tokens": 4} | ({} if topk is None else {"speculative_eagle_topk": topk})
    p = _plan(_qwen3_next(tmp_path), **sets)
    term = next(t for t in p.chain if t.label == "speculative state (reserved)")
    reqs = p.max_running_requests
    cols = 12 if dense else 6
    alloc = 36 * (reqs + 1) * (4 * 8 * 128 * 128 * 4 + cols * 2_048 * 2)
    assert f"allocated {alloc:,} B" in term.detail
    assert ("dense: KDA or eagle top-k > 1" in "\n".join(p.notes)) is dense


@pytest.mark.parametrize(("dp", "running"), [(1, 48), (2, 24)])
def test_the_speculative_48_are_per_dp_worker(tmp_path: Path, dp: int, running: int) -> None:
    # _handle_eagle_family: "Max running requests is reset to 48 for speculative decoding."; _handle_max_mamba_cache
    # reserves the intermediate state for max_running_requests // dp_size = 48 // dp requests a worker (+ 1 pad):
    # per_req (19,316,736 B at attention tp 4, PER_TP2 at tp 2) × (running + 1) × 4 draft tokens
    p = _plan(_qwen3_next(tmp_path), tp=4, dp_attention=dp, speculative_num_draft_tokens=4)
    per = 19_316_736 if dp == 1 else PER_TP2
    assert p.max_running_requests == running
    assert next(t for t in p.chain if t.label == "speculative state (reserved)").bytes == per * (running + 1) * 4
    # the given size a worker: 100 // dp
    assert (
        _plan(_qwen3_next(tmp_path), tp=4, dp_attention=dp, max_mamba_cache_size=100).extras["max_mamba_cache_size"]
        == 100 // dp
    )


def test_a_hybrid_of_one_sliding_layer() -> None:
    # gpt-oss-120b with every sliding layer but the first made full attention (8 KV heads × 64, the same shape):
    # SWAKVPool over the one SWA layer, at tp 8 one KV head a rank: K + V 2 × 64 × 2 B = 256 B a token a page row
    arch = load_model("gpt-oss-120b")
    full = arch.layers[1].caches
    first = next(i for i, layer in enumerate(arch.layers) if layer.window is not None)
    layers = tuple(
        layer if layer.window is None or i == first else replace(layer, caches=full)
        for i, layer in enumerate(arch.layers)
    )
    dep = load_deployment("glm-5.3-8xh200-sglang", ["context_length=32768", "weights_per_gpu=20GiB"])
    p = plan_pool(
        replace(arch, layers=layers), replace(dep, model="gpt-oss-120b", kv_cache_dtype="auto", page_size=None)
    )
    swa = next(pool for pool in p.pools if pool.name.startswith("sliding window"))
    assert (swa.name, swa.unit_bytes) == ("sliding window (1 layers)", 256 * p.page_tokens)
    assert p.pools[0].name == "full attention (35 layers)"


# ---- the whole module's mutants (--sample 0, seed 63203): the draft pool, the chain's details, the SWA pages


def test_qwen3_next_draft_pool_is_one_layer_beyond_the_budget(tmp_path: Path) -> None:
    # _build_hybrid_linear_kv_pool: the draft worker's HybridLinearKVPool of ONE full-attention layer ([0] if
    # is_draft_worker) over the target's max_total_num_tokens + page rows: at tp 4 one of 2 KV heads a rank,
    # K + V 2 × 256 × 2 B = 1,024 B a row; allocated beyond the budget, from the slack (the reserve segment)
    p = _plan(_qwen3_next(tmp_path), tp=4, speculative_num_draft_tokens=4)
    draft = (p.rows + p.page_tokens) * 1_024
    assert p.extras["draft_alloc_bytes"] == next(t for t in p.chain if t.label == "MTP draft KV pool").bytes == draft
    seg = {s.label: s.bytes for s in p.memory_map}
    assert seg["draft"] == draft and p.allocated_bytes == seg["main KV"] + draft
    # the map still adds up to the GPU: the draft came out of the reserve, not on top of it
    assert sum(seg.values()) == p.deployment.gpu.nvml_total_bytes
    assert seg["reserve"] == p.deployment.gpu.nvml_total_bytes - seg["weights"] - seg["main KV"] - draft


def test_no_rows_no_draft_pool(tmp_path: Path) -> None:
    # weights that leave no token pool: rows 0, and the draft worker has no rows to mirror
    p = _plan(_qwen3_next(tmp_path), tp=4, speculative_num_draft_tokens=4, weights_per_gpu="139GiB")
    assert (p.rows, p.extras["draft_alloc_bytes"]) == (0, 0)


def test_the_chain_says_the_hybrid_rows(tmp_path: Path) -> None:
    # a Mamba hybrid: the state pool comes out of the budget before the token pool; the cell is the full layers'
    q = {t.label: t.detail for t in _plan(_qwen3_next(tmp_path), tp=4).chain}
    assert q["available for the KV pool"] == "free after weights − slack − Mamba state pool"
    assert q["cell"] == "bytes per full-attention pool row (12 full layers)"
    assert q["slack (non-KV reserve)"].startswith("pre-load free × (1 − mem_fraction_static 0.897)")
    # gpt-oss at --swa-full-tokens-ratio 0.5 and 64-token pages (HybridSWAPoolConfigurator): full 4,608 B a row
    # (18 layers × 256 B at tp 8) + 0.5 × the SWA 4,608
    p = _plan("gpt-oss-120b", swa_full_tokens_ratio=0.5, page_size=64)
    g = {t.label: t.detail for t in p.chain}
    assert g["available for the KV pool"] == "free after weights − slack"
    assert g["cell"] == "bytes per full-attention pool row (18 full layers)"
    assert g["pool rows per GPU"] == (
        f"{p.rows:,} = int(available // (4,608 + 0.5 × 4,608)) // 64 × 64 (full_layer_tokens)"
    )
    # SWAKVPool's pages: swa_tokens = int(rows × 0.5) // 64 × 64, in pages of 64 × 4,608 B
    swa = next(pool for pool in p.pools if pool.name.startswith("sliding window"))
    assert p.extras["swa_tokens"] == int(p.rows * 0.5) // 64 * 64
    assert (swa.capacity, swa.unit_bytes) == (p.extras["swa_tokens"] // 64, 4_608 * 64)
    assert p.pools[0].capacity == p.rows // 64


def test_glm_flash_page_said_only_when_overridden() -> None:
    # _deepseek_family_overrides sets 64 × index_kpool 4 = 256: said over a --page-size 64, silent with none given
    # or 256 given
    for sets, said in ((["page_size=64"], True), (["page_size=256"], False), ([], False)):
        dep = load_deployment("glm-5.3-8xh200-sglang", sets)
        if not sets:
            dep = replace(dep, page_size=None)
        p = plan_pool(load_model("glm-5.3-flash"), dep)
        assert p.page_tokens == 256
        assert any("Setting page size to 256 for DeepSeek DSA." in n for n in p.notes) is said


def test_full_layers_unlike_the_config_are_refused_naming_the_layer(tmp_path: Path) -> None:
    # Qwen3-Next's shape with 2 layers (one GDN, one full) whose one full layer has 4 KV heads, not the config's 2
    cfg = json.loads(Path(_qwen3_next(tmp_path), "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**cfg, "num_hidden_layers": 2, "full_attention_interval": 2}))
    arch = load_model(str(tmp_path))
    off = replace(arch.layers[1].caches[0], num_kv_heads=4)
    arch = replace(arch, layers=(arch.layers[0], replace(arch.layers[1], caches=(off,))))
    dep = load_deployment("glm-5.3-8xh200-sglang", ["context_length=32768", "weights_per_gpu=20GiB", "tp=4"])
    with pytest.raises(
        PlanError, match=r"full-attention layers unlike the config's fields \(FullAttention\(num_kv_heads=4"
    ):
        plan_pool(arch, replace(dep, model=str(tmp_path), kv_cache_dtype="auto", page_size=None))
