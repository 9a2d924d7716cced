"""Properties of the hybrid cache kinds (issue 13) and fuzzing of the hybrid configs' readers.

- per-kind bytes add up to the request's total, whatever mix of kinds the layers own;
- a window never holds more than its window (nor more than the request), compressed states never more than
  ctx / ratio;
- a longer request never needs fewer bytes of any kind, and a state does not grow with the context at all;
- any mutation of a hybrid config.json loads or fails with one line (exit 2), and a hybrid that plans has its pools.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import assume, given
from hypothesis import strategies as st

from kvplan.engines import plan_pool
from kvplan.engines.sglang_allswa import planned_here
from kvplan.errors import InputError, PlanError
from kvplan.models.cache import (
    CacheKind,
    CompressedAttention,
    FullAttention,
    IndexerK,
    Layer,
    LinearState,
    MlaLatent,
    SlidingWindow,
    request_bytes,
    request_bytes_by_kind,
)
from kvplan.models.deployment import load_deployment
from kvplan.models.from_hf import load_model
from tests.fuzz.conftest import one_line_error

HF = Path(__file__).resolve().parents[1] / "data" / "hf"

heads = st.sampled_from([1, 2, 4, 8, 16, 32, 64])
dims = st.sampled_from([64, 128, 256])
kinds: st.SearchStrategy[CacheKind] = st.one_of(
    st.builds(FullAttention, heads, dims, dims),
    st.builds(
        lambda h, d, w, s: SlidingWindow(h, d, d, window=w, sinks=s),
        heads,
        dims,
        st.integers(1, 1 << 17),
        st.booleans(),
    ),
    st.builds(MlaLatent, st.sampled_from([256, 512]), st.sampled_from([0, 64])),
    st.builds(
        lambda d, k, r: IndexerK(d, k, r), st.sampled_from([64, 128]), st.sampled_from([1, 4]), st.sampled_from([1, 4])
    ),
    st.builds(
        lambda f, h, d, k: LinearState(f, h, h, d, d, k),
        st.sampled_from(["gated_deltanet", "kda"]),
        heads,
        dims,
        st.integers(2, 8),
    ),
    st.builds(lambda w, r: CompressedAttention(512, 64, w, r), st.integers(1, 4096), st.sampled_from([0, 4, 128])),
)
ctxs = st.integers(0, 1 << 21)
tps = st.sampled_from([1, 2, 4, 8])
engines = st.sampled_from(["sglang", "vllm"])


def _bytes(c: CacheKind, ctx: int, tp: int, engine: str) -> int:
    try:
        return request_bytes(c, ctx, tp, engine)
    except PlanError:  # a state's heads not divisible by tp: the engines assert the same
        return -1


@given(st.lists(st.lists(kinds, min_size=1, max_size=3), min_size=1, max_size=12), ctxs, tps, engines)
def test_per_kind_bytes_add_up_to_the_total(layer_caches: list[list[CacheKind]], ctx: int, tp: int, e: str) -> None:
    layers = tuple(Layer(i, tuple(cs)) for i, cs in enumerate(layer_caches))
    per_layer = [_bytes(c, ctx, tp, e) for layer in layers for c in layer.caches]
    assume(-1 not in per_layer)  # a plan to add up (hypothesis fails if every draw is refused)
    by_kind = request_bytes_by_kind(layers, ctx, tp, e)
    assert sum(b for _, _, b in by_kind) == sum(per_layer)
    assert sum(n for _, n, _ in by_kind) == len(per_layer)
    assert all(b >= 0 for _, _, b in by_kind)


@given(st.integers(1, 8), dims, st.integers(1, 1 << 17), ctxs, tps)
def test_a_window_never_holds_more_than_its_window(h: int, d: int, window: int, ctx: int, tp: int) -> None:
    sw = SlidingWindow(h, d, d, window=window)
    assert sw.tokens_held(ctx) == min(ctx, window)
    assert sw.bytes_per_request(ctx, tp, "bf16") <= window * sw.bytes_per_token(tp, "bf16")
    for ratio in (0, 4, 128):
        c = CompressedAttention(512, 64, window, ratio)
        assert c.window_tokens(ctx) <= min(ctx, window)
        assert c.compressed_states(ctx) <= (ctx // ratio if ratio else 0)


@given(kinds, ctxs, st.integers(0, 1 << 16), tps, engines)
def test_more_tokens_never_need_fewer_bytes(c: CacheKind, ctx: int, more: int, tp: int, e: str) -> None:
    before, after = _bytes(c, ctx, tp, e), _bytes(c, ctx + more, tp, e)
    assert after >= before
    if isinstance(c, LinearState):
        assert after == before  # a state is fixed per request


_CONFIGS = {name: json.loads((HF / name / "config.json").read_text()) for name in ("gpt-oss-120b", "deepseek-v4-flash")}
_VALUES: st.SearchStrategy[Any] = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 1 << 20), st.text(max_size=8),
    st.lists(st.integers(-1, 200), max_size=50), st.lists(st.sampled_from(["sliding_attention", "full_attention", "x"]),
                                                         max_size=40),
)  # fmt: skip
_KEYS = ("layer_types", "sliding_window", "compress_ratios", "num_hidden_layers", "num_key_value_heads", "head_dim",
         "qk_rope_head_dim", "index_head_dim", "architectures", "use_sliding_window")  # fmt: skip


_KEEP = object()
"""The key left as published: half the draws, so enough mutated configs load to be planned (most mutations are
refused at load, and a test that filters nearly every draw fails hypothesis' filter health check)."""


@given(st.sampled_from(sorted(_CONFIGS)), st.sampled_from(_KEYS), st.one_of(st.just(_KEEP), _VALUES))
def test_a_mutated_hybrid_config_loads_or_fails_in_one_line(name: str, key: str, value: Any) -> None:
    import tempfile

    cfg = dict(_CONFIGS[name]) if value is _KEEP else dict(_CONFIGS[name], **{key: value})
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "config.json").write_text(json.dumps(cfg))
        arch = one_line_error(lambda: load_model(tmp))
    assume(arch is not None)  # a mutated config that loads, to plan (hypothesis fails if none does)
    dep = load_deployment(None, ["model=glm-5.3", "weights_per_gpu=10GiB"])
    try:
        p = plan_pool(arch, dep)  # type: ignore[arg-type]
    except InputError as e:
        assert "\n" not in str(e)
        return
    # a hybrid an engine plans (issue 13 engine rules) comes with its pools; a uniform model with none, and so does
    # a sliding-window model SGLang sizes as one pool (kvplan.engines.sglang_allswa: every layer sliding, or an
    # architecture its is_hybrid_swa_model does not list, e.g. gpt-oss with `architectures` mutated away)
    one_pool = dep.engine == "sglang" and planned_here(arch)  # type: ignore[arg-type]
    assert bool(p.pools) == (arch.is_hybrid and not one_pool)  # type: ignore[attr-defined]


_GLM53_FLASH_LIKE = {  # written by the test (no published GLM-5.3-Flash config was found): SGLang's field names
    "num_hidden_layers": 8, "num_attention_heads": 64, "kv_lora_rank": 512, "qk_rope_head_dim": 0,
    "max_position_embeddings": 1013760, "index_topk": 512, "index_head_dim": 128, "index_kpool": 4,
    "linear_attn_config": {"kda_layers": [0, 1, 2, 4, 5, 6], "full_attn_layers": [3, 7], "num_heads": 64,
                           "head_dim": 128, "short_conv_kernel_size": 4},
}  # fmt: skip
_TEXT_KEYS = ("num_hidden_layers", "kv_lora_rank", "index_kpool", "index_topk", "linear_attn_config", "layer_types",
              "indexer_types", "index_topk_freq", "linear_num_heads", "qk_rope_head_dim")  # fmt: skip


@given(st.sampled_from(_TEXT_KEYS), _VALUES, st.sampled_from(["kda_layers", "num_heads", "head_dim", None]), _VALUES)
def test_a_mutated_glm53_flash_config_loads_or_fails_in_one_line(key: str, value: Any, inner: str | None,
                                                                  inner_value: Any) -> None:  # fmt: skip
    import tempfile

    text = dict(_GLM53_FLASH_LIKE, **{key: value})
    if inner is not None and isinstance(text.get("linear_attn_config"), dict):
        text["linear_attn_config"] = dict(text["linear_attn_config"], **{inner: inner_value})
    with tempfile.TemporaryDirectory() as tmp:
        cfg = {"architectures": ["Glm5NextForConditionalGeneration"], "text_config": text}
        (Path(tmp) / "config.json").write_text(json.dumps(cfg))
        arch = one_line_error(lambda: load_model(tmp))
    if arch is not None:
        assert len(arch.layers) == arch.num_layers  # type: ignore[attr-defined]
