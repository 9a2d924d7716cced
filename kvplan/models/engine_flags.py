"""The engines' launch flags as data: one table per engine, rows keyed by the versions that have them.

Each row names the kvplan knob, the engine's own spelling and the versions whose argument parser takes it, read
from the engine source (cited at ``SGLANG_FLAGS`` and ``VLLM_FLAGS``).

A knob with no row is one of kvplan's own inputs (the GPU, measured weights, a memory figure), not an engine flag.
A row with an empty ``knob`` is a companion flag the command needs (``--enable-dp-attention``) and the parser
must take. Versions are compared by their release numbers only (``kvplan.versions`` validated them).
"""

from __future__ import annotations

import difflib
import re

from kvplan import record


@record(kw_only=True)
class Flag:
    knob: str
    """kvplan's knob ('' for a companion flag)."""
    spelling: str
    """'--tp-size', or an environment variable's name (kind 'env'), or '' for vLLM's positional model."""
    kind: str = "value"
    """value (takes one argument), true (store_true), bool (--x / --no-x), env (environment variable)."""
    since: str = ""
    """First version whose parser has it ('' = every version kvplan plans)."""
    until: str = ""
    """First version whose parser no longer has it."""
    aliases: tuple[str, ...] = ()
    values: tuple[tuple[str, str], ...] = ()
    """(kvplan value, engine value) where the spellings differ."""
    choices: tuple[str, ...] = ()
    """The engine's accepted values (empty: any); a kvplan value outside them is not emitted but refused."""
    part: str = ""
    """Which half of a compound knob: 'prefill' / 'decode' of an SGLang DSA attention_backend."""
    family: str = ""
    """'dsa' / 'other': the row applies only to DSA models, or only to the rest ('' = every model)."""


_SGL = "sglang python/sglang/srt/server_args.py"
_VLLM = "vllm vllm/engine/arg_utils.py EngineArgs.add_cli_args"

SGLANG_KV_DTYPES = ("auto", "fp8_e5m2", "fp8_e4m3", "bf16", "bfloat16", "fp4_e2m1")
"""``--kv-cache-dtype`` choices of 0.5.9 (0.5.23 adds mxfp8, nvfp4, fp4_mx_block16); no fp16 spelling."""

VLLM_KV_DTYPES = ("auto", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla")
"""vLLM ``CacheDType`` (vllm/config/cache.py): ``bf16`` is spelled bfloat16; fp16 has no spelling (auto follows
--dtype)."""

# SGLang: ``python/sglang/srt/server_args.py``. In 0.5.23 every ``ServerArgs`` field is annotated
# (``A[T, Arg(...)]``) and ``add_cli_args_from_dataclass`` derives the flag from the field name (``tp_size`` ->
# ``--tp-size``, aliases ``--tensor-parallel-size``); 0.4.x-0.5.9 wrote the same flags by hand in
# ``ServerArgs.add_cli_args``. argparse's prefix matching makes ``--tp`` and ``--mem-frac`` work too.
SGLANG_FLAGS: tuple[Flag, ...] = (
    Flag(knob="model", spelling="--model-path", aliases=("--model",)),
    Flag(knob="tp", spelling="--tp-size", aliases=("--tensor-parallel-size",)),
    # --dp-size alone is data-parallel replicas; with --enable-dp-attention it is kvplan's dp_attention
    Flag(knob="dp_attention", spelling="--dp-size", aliases=("--data-parallel-size",)),
    Flag(knob="", spelling="--enable-dp-attention", kind="true"),
    Flag(knob="ep", spelling="--ep-size", aliases=("--expert-parallel-size",)),
    Flag(knob="pp", spelling="--pp-size", aliases=("--pipeline-parallel-size",)),
    # ServerArgs.dcp_size (aliases --decode-context-parallel-size); kvplan's 0.5.10 row is the first with dcp
    Flag(knob="dcp", spelling="--dcp-size", aliases=("--decode-context-parallel-size",), since="0.5.10"),
    Flag(knob="nodes", spelling="--nnodes"),
    Flag(knob="", spelling="--node-rank"),
    Flag(knob="", spelling="--dist-init-addr", aliases=("--nccl-init-addr",)),
    Flag(knob="", spelling="--trust-remote-code", kind="true"),
    # add_cli_args' choices grew: (auto, fp8_e5m2, fp8_e4m3), then bf16, then bfloat16 and fp4_e2m1; kvplan
    # emits bf16 (every list that has a bf16 has it) from the DSA work (0.5.3), and refuses it before
    Flag(
        knob="kv_cache_dtype",
        spelling="--kv-cache-dtype",
        values=(("fp8", "fp8_e4m3"), ("fp8_ds_mla", "fp8_e4m3")),
        choices=("auto", "fp8_e5m2", "fp8_e4m3"),
        until="0.5.3",
    ),
    Flag(
        knob="kv_cache_dtype",
        spelling="--kv-cache-dtype",
        values=(("fp8", "fp8_e4m3"), ("fp8_ds_mla", "fp8_e4m3"), ("bfloat16", "bf16")),  # the layout follows
        choices=SGLANG_KV_DTYPES,  # the dtype and the backend
        since="0.5.3",
    ),
    Flag(knob="attention_backend", spelling="--attention-backend", family="other"),
    # DSA backends: --nsa-* from the NSA work (sgl-project/sglang#11061, 0.5.3); 0.5.23 spells them --dsa-* and
    # keeps --nsa-* as deprecated aliases (NSA_CHOICES = DSA_CHOICES "# deprecated alias")
    Flag(knob="attention_backend", spelling="--nsa-prefill-backend", part="prefill", family="dsa", until="0.5.23"),
    Flag(knob="attention_backend", spelling="--nsa-decode-backend", part="decode", family="dsa", until="0.5.23"),
    Flag(
        knob="attention_backend",
        spelling="--dsa-prefill-backend",
        aliases=("--nsa-prefill-backend",),
        part="prefill",
        family="dsa",
        since="0.5.23",
    ),
    Flag(
        knob="attention_backend",
        spelling="--dsa-decode-backend",
        aliases=("--nsa-decode-backend",),
        part="decode",
        family="dsa",
        since="0.5.23",
    ),
    Flag(knob="mem_fraction_static", spelling="--mem-fraction-static"),
    Flag(knob="page_size", spelling="--page-size"),
    Flag(knob="chunked_prefill_size", spelling="--chunked-prefill-size"),
    Flag(knob="max_running_requests", spelling="--max-running-requests"),
    Flag(knob="context_length", spelling="--context-length"),
    Flag(knob="max_total_tokens", spelling="--max-total-tokens"),
    # MTP is EAGLE in SGLang: --speculative-algorithm EAGLE, a chain of num_steps = draft tokens - 1
    Flag(knob="", spelling="--speculative-algorithm"),
    Flag(knob="", spelling="--speculative-num-steps"),
    Flag(knob="speculative_num_draft_tokens", spelling="--speculative-num-draft-tokens"),
    Flag(knob="speculative_eagle_topk", spelling="--speculative-eagle-topk"),
    Flag(knob="cuda_graph_max_bs", spelling="--cuda-graph-max-bs"),
    Flag(knob="swa_full_tokens_ratio", spelling="--swa-full-tokens-ratio"),
    Flag(knob="max_mamba_cache_size", spelling="--max-mamba-cache-size"),
    Flag(knob="disable_radix_cache", spelling="--disable-radix-cache", kind="true"),
    Flag(knob="dtype", spelling="--dtype"),
    Flag(knob="disable_cuda_graph", spelling="--disable-cuda-graph", kind="true"),
    Flag(knob="rope_scaling", spelling="--json-model-override-args"),
    Flag(knob="quantization", spelling="--quantization"),
    Flag(knob="swa_eviction_interval", spelling="SGLANG_SWA_EVICTION_INTERVAL", kind="env"),
    Flag(knob="pp_layer_partition", spelling="SGLANG_PP_LAYER_PARTITION", kind="env"),
    Flag(knob="allow_long_context", spelling="SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN", kind="env"),
)
"""SGLang's launch flags (``python -m sglang.launch_server``), from server_args.py of 0.5.9 and 0.5.23."""

# vLLM: ``vllm/engine/arg_utils.py`` ``EngineArgs.add_cli_args`` (flags derived from the config dataclasses;
# ``max_model_len`` parsed by ``human_readable_int_or_auto``: ``-1`` or ``auto``), and ``vllm serve MODEL``: the
# model is ``serve``'s positional ``model_tag`` (``vllm/entrypoints/cli/serve.py``).
VLLM_FLAGS: tuple[Flag, ...] = (
    Flag(knob="model", spelling=""),  # vllm serve MODEL (positional model_tag)
    Flag(knob="tp", spelling="--tensor-parallel-size", aliases=("-tp",)),
    Flag(knob="dp_attention", spelling="--data-parallel-size", aliases=("-dp",)),
    Flag(knob="ep", spelling="--enable-expert-parallel", kind="true"),  # EP size is tp × dp, not a number
    Flag(knob="pp", spelling="--pipeline-parallel-size", aliases=("-pp",)),
    # ParallelConfig.decode_context_parallel_size (vllm-project/vllm#23734; -dcp used in #24385 on 2025-09-07: v0.10.2)
    Flag(knob="dcp", spelling="--decode-context-parallel-size", aliases=("-dcp",), since="0.10.2"),
    Flag(knob="", spelling="--trust-remote-code", kind="true"),
    Flag(knob="kv_cache_dtype", spelling="--kv-cache-dtype", values=(("bf16", "bfloat16"),), choices=VLLM_KV_DTYPES),
    # AttentionConfig.backend: --attention-backend from vllm-project/vllm#26315 (merged after 2025-11-24, v0.12.0),
    # which deprecated the VLLM_ATTENTION_BACKEND variable (no longer read by 0.26: vllm-project/vllm#50292)
    Flag(knob="attention_backend", spelling="VLLM_ATTENTION_BACKEND", kind="env", until="0.12.0"),
    Flag(knob="attention_backend", spelling="--attention-backend", since="0.12.0"),
    Flag(knob="gpu_memory_utilization", spelling="--gpu-memory-utilization"),
    # CacheConfig.kv_cache_memory_bytes ("Allow users to specify kv cache memory size", vllm-project/vllm#21489);
    # kvplan emits it from v0.11.0, the first release it is sure carries it
    Flag(knob="kv_cache_memory", spelling="--kv-cache-memory-bytes", since="0.11.0"),
    Flag(knob="page_size", spelling="--block-size"),
    Flag(knob="max_num_batched_tokens", spelling="--max-num-batched-tokens"),
    Flag(knob="max_running_requests", spelling="--max-num-seqs"),
    Flag(knob="context_length", spelling="--max-model-len", values=(("-1", "auto"),)),
    # SpeculativeConfig as JSON, method "mtp" (the GLM / DeepSeek MTP heads; vllm-project/recipes GLM.md #177);
    # kvplan emits it from v0.10.1 and refuses older versions rather than guess their spelling
    Flag(knob="speculative_num_draft_tokens", spelling="--speculative-config", since="0.10.1"),
    Flag(knob="dtype", spelling="--dtype"),
    # SchedulerConfig.async_scheduling: a BooleanOptionalAction (--async-scheduling / --no-async-scheduling)
    Flag(knob="async_scheduling", spelling="--async-scheduling", kind="bool", since="0.10.1"),
    Flag(knob="num_gpu_blocks_override", spelling="--num-gpu-blocks-override"),
    # envs.py VLLM_USE_FLASHINFER_SAMPLER; an install without FlashInfer samples as with 0
    Flag(knob="flashinfer_sampler", spelling="VLLM_USE_FLASHINFER_SAMPLER", kind="env"),
    Flag(
        knob="disable_hybrid_kv_cache_manager",
        spelling="--disable-hybrid-kv-cache-manager",
        kind="true",
        since="0.10.0",
    ),
    Flag(knob="disable_cuda_graph", spelling="--enforce-eager", kind="true"),
    Flag(knob="rope_scaling", spelling="--hf-overrides"),
    Flag(knob="quantization", spelling="--quantization", aliases=("-q",)),
    Flag(knob="pp_layer_partition", spelling="VLLM_PP_LAYER_PARTITION", kind="env"),
    Flag(knob="allow_long_context", spelling="VLLM_ALLOW_LONG_MAX_MODEL_LEN", kind="env"),
)
"""vLLM's launch flags (``vllm serve``), from arg_utils.py EngineArgs.add_cli_args of 0.33.0 and the releases that
added them."""

FLAG_TABLES = {"sglang": SGLANG_FLAGS, "vllm": VLLM_FLAGS}
SOURCES = {"sglang": _SGL, "vllm": _VLLM}


def _release(version: str) -> tuple[int, ...]:
    m = re.match(r"v?(\d+(?:\.\d+)*)", version.strip())
    numbers = tuple(int(x) for x in m.group(1).split(".")) if m else ()
    return (*numbers, 0, 0, 0)[:3]


def _in_force(row: Flag, version: str) -> bool:
    v = _release(version)
    return (not row.since or v >= _release(row.since)) and (not row.until or v < _release(row.until))


def flags_for(engine: str, version: str) -> tuple[Flag, ...]:
    """The rows of this engine's table its ``version`` parser has."""
    return tuple(row for row in FLAG_TABLES[engine] if _in_force(row, version))


def _norm(spelling: str) -> str:
    return spelling.lstrip("-").replace("-", "_").lower()


_NOT_A_VALUE = ("--speculative-config", "--hf-overrides", "--json-model-override-args", "--enable-expert-parallel")
"""Flags whose argument is not the knob's value (JSON, or EP as a switch): ``--set`` takes the knob instead."""


def spellings() -> dict[str, str]:
    """Every engine spelling of any version (dashes as underscores, no leading dashes) -> kvplan's knob."""
    out: dict[str, str] = {}
    for table in FLAG_TABLES.values():
        for row in table:
            if row.knob and row.spelling and row.kind != "env" and not row.part and row.spelling not in _NOT_A_VALUE:
                for s in (row.spelling, *row.aliases):
                    if len(s.lstrip("-")) > 2:  # -tp, -q: short options, not names a --set key spells
                        out.setdefault(_norm(s), row.knob)
    return out


def knob_for_prefix(key: str) -> str | None:
    """The knob of the one engine flag ``key`` abbreviates (argparse's allow_abbrev: SGLang's ``--mem-frac``)."""
    k = _norm(key)
    hits = {knob for s, knob in spellings().items() if s.startswith(k)}
    return hits.pop() if len(k) >= 4 and len(hits) == 1 else None


def spelled_by(key: str) -> str:
    """Whose flag ``key`` (underscores, no dashes) is: "SGLang's", "vLLM's" or "SGLang's and vLLM's"."""
    names = {"sglang": "SGLang's", "vllm": "vLLM's"}
    who = [names[e] for e, table in FLAG_TABLES.items() if any(_norm(s) == key for r in table
                                                                  for s in (r.spelling, *r.aliases))]  # fmt: skip
    return " and ".join(who)


def nearest_knob(key: str, knobs: tuple[str, ...]) -> str:
    """' (did you mean ...?)' for an unknown key: the nearest of kvplan's knobs or the engines' flags (a flag named
    with the knob it sets), or '' when nothing is near."""

    flags = spellings()
    close = difflib.get_close_matches(key, [*knobs, *flags], n=1)
    if not close:
        return ""
    knob = flags.get(close[0], close[0])
    flag = f", {spelled_by(close[0])} --{close[0].replace('_', '-')}" if knob != close[0] else ""
    return f" (did you mean {knob!r}{flag}?)"
