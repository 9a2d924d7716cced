"""The patterns each engine line is read with. The parse is pure (text in, data out) apart from
``records.log_lines``, which streams a file: a regular file under ``limits.LOG``, lines cut at
``limits.MAX_LINE_CHARS``, never read whole. Every pattern
is linear in the line (bounded repeats), a record joined from wrapped lines stops growing at the line cap, and a
figure of more than 30 digits is not an engine's (the line is not recognised), so no log, however hostile, makes
the parse slower than linear or an integer too long to convert.

The lines read are the engines' exact format strings (shared/reference/sglang-0.5.23.md §6 and §10,
shared/reference/vllm-0.33.0.md §3-4), quoted at ``_SG_ARGS`` (SGLang) and ``_VL_VERSION`` (vLLM).
"""

from __future__ import annotations

import re

# the line tables read these from here too (a pattern kept beside the facts it reads)
from kvplan.runbook.failures import SG_FAILED as SG_FAILED
from kvplan.runbook.failures import SG_PROFILED as SG_PROFILED
from kvplan.runbook.failures import VL_FAILED as VL_FAILED
from kvplan.runbook.long_context import LONG_ENV as LONG_ENV
from kvplan.runbook.long_context import SG_LONG_LEN as SG_LONG_LEN
from kvplan.runbook.long_context import VL_LONG_LEN as VL_LONG_LEN

# --------------------------------------------------------------------------- patterns

_NUM = r"(\d{1,30}(?:\.\d{1,30})?)"
"""A figure as the engines print it; a longer run of digits is not one of their lines (never matched)."""
_TOKENS = r"(\d[\d,]{0,40})"
_INT = r"(\d{1,30})(?!\d)"
_ARG_INT = re.compile(r"-?\d{1,30}")
_ARG_NUMBER = re.compile(r"\d{1,30}(?:\.\d{1,30})?")
_DICT_ITEM = re.compile(r"'(\w{1,128})':[ \t]{0,16}('[^']{0,4096}'|[^,}]{1,4096})")
_LOAD_AVAIL = re.compile(rf"avail mem={_NUM} GB")
_LOAD_USAGE = re.compile(rf"mem usage={_NUM} GB")
_LOAD_TYPE = re.compile(r"type=(\w{1,128})")
_LOAD_DTYPE = re.compile(r"\bdtype=([\w.]{1,64})")
_LOAD_QUANT = re.compile(r"\bquant=(\w{1,64})")

# SGLang (every "GB" it prints is GiB: ``/ (1 << 30)``):
#   server_args=ServerArgs(model_path='...', tp_size=8, ..., mem_fraction_static=0.886, ...)
#   Load weight begin. avail mem={:.2f} GB
#   Load weight end. elapsed={:.2f} s, type={Class}, [quant=fp8, fmt=e4m3, ]avail mem={:.2f} GB, mem usage={:.2f} GB.
#       (older releases: ``Load weight end. type=..., dtype=..., avail mem=..., mem usage=...``)
#   KV Cache is allocated. dtype: {torch dtype}, #tokens: {S}, KV size: {:.2f} GB       (0.5.9: no ``dtype: ``)
#   KV Cache is allocated. #tokens: {S}, K size: {:.2f} GB, V size: {:.2f} GB             (MHA / GQA models)
#   Memory pool end. avail mem={:.2f} GB
#   max_total_num_tokens={N}, chunked_prefill_size={C}, max_prefill_tokens={P}, max_running_requests={R},
#       context_len={L}[, available_gpu_mem={:.2f} GB]                                     (older: no available_*)
#   Setting page size to 64 for DeepSeek DSA. / Setting KV cache dtype to {dtype} for DeepSeek DSA on SM{n} device.
#   Set DSA backends for {dtype} KV Cache: prefill={p}, decode={d}.                         (0.5.9: NSA)
_SG_ARGS = re.compile(r"server_args=ServerArgs\(")
_SG_BASELINE = re.compile(rf"Memory baseline taken\. mem usage={_NUM} GB")
_SG_LOAD_BEGIN = re.compile(rf"Load weight begin\. avail mem={_NUM} GB")
_SG_LOAD_END = re.compile(
    r"Load weight end\.((?:(?!Load weight |KV Cache |Memory pool end|max_total_num_tokens=).){0,1000})"
)
_SG_KV = re.compile(
    r"KV Cache (?:is allocated|VA upper bound)\. (?:dtype: (?P<dtype>[\w.]{1,64}), )?"
    r"(?:#tokens: (?P<tokens>\d{1,30}), )?"
    rf"(?:KV size: {_NUM} GB|K size: {_NUM} GB, V size: {_NUM} GB)"
)
_SG_POOL_END = re.compile(rf"Memory pool end\. avail mem={_NUM} GB")
_SG_SUMMARY = re.compile(
    r"max_total_num_tokens=(\d{1,30}), (?:chunked_prefill_size=(-?\d{1,30}), )?max_prefill_tokens=(\d{1,30}), "
    rf"max_running_requests=(\d{{1,30}}), context_len={_INT}(?:, available_(?:gpu|cpu)_mem={_NUM} GB)?"
)
_SG_PAGE = re.compile(r"Setting page size to (\d{1,30}) for DeepSeek [DN]SA")
_SG_KV_DTYPE = re.compile(r"Setting KV cache dtype to (\w{1,64}) for DeepSeek [DN]SA")
_SG_BACKENDS = re.compile(r"Set [DN]SA backends for \w{1,64} KV Cache: prefill=(\w{1,64}), decode=(\w{1,64})")
_SG_NEGATIVE = re.compile(r"max_total_num_tokens\b[^\n]{0,200}?\bis negative")
_SG_MAMBA = re.compile(
    rf"Mamba Cache is allocated\. max_mamba_cache_size: {_INT}, conv_state size: {_NUM} ?GB, "
    rf"ssm_state size: {_NUM} ?GB"
)
_SG_TOTAL = re.compile(r"^max_total_num_tokens=(\d{1,30})\s{0,8}$")
"""SGLang 0.3.x ``bench_latency``: ``max_total_num_tokens=N`` alone on a line (the pool, no scheduler summary)."""
_SG_SWA_SIZES = re.compile(rf"Use sliding window memory pool\. full_layer_tokens={_INT}, swa_layer_tokens={_INT}")
_SG_SWA_POOL = re.compile(rf"SWAKVPool mem usage: {_NUM} GB, swa size: {_INT}, full size: {_INT}")
_SG_ERROR = re.compile(
    r"Not enough memory\. Please try to increase --mem-fraction-static"
    r"|Loaded weights leave no GPU memory for the KV cache"
)

# vLLM:
#   vLLM API server version {v} / non-default args: {...} /
#   Initializing a V1 LLM engine (v{v}) with config: model='...', ..., max_seq_len=..., tensor_parallel_size=..., ...
#   Setting kv cache block size to {n} for {backends} backend(s). / Using {fmt} KV cache format for {backend} backend.
#   Model loading took {x} GiB memory and {t} seconds            (older: ``Model loading took {x:.4f} GiB and ...``)
#   Available KV cache memory: {x} GiB
#   Overriding num_gpu_blocks={n} with num_gpu_blocks_override={m}
#   Multiplying the GPU KV cache size by the dcp_world_size {d}.
#   GPU KV cache size: {N:,} tokens[, Maximum concurrency for {L:,} tokens per request: {c:.2f}x]
#   To serve at least one request with the model's max seq len ({L}), ({x} GiB KV cache is needed, which is larger
#       than the available KV cache memory ({y} GiB). [Based on the available memory, the estimated maximum model
#       length is {n}. ]Try increasing ...
_VL_VERSION = re.compile(r"vLLM API server version (\S{1,64})")
_VL_BANNER = re.compile(r"█[ \t]{1,16}version (\d[^\s]{0,63})")
"""vLLM >= 0.11's start-up banner: ``▄▄ ▄█ █     █     █ ▀▄▀ █  version 0.19.0``."""
_VL_ENGINE = re.compile(
    r"Initializing an? (?:(?P<gen>V[01]) )?LLM engine (?:\(v?(?P<v>[^)\s]{1,64})\) )?with config: (?P<cfg>.*)"
)
_VL_NON_DEFAULT = re.compile(r"non-default args: \{")
"""Only the start: the dict runs to the record's last ``}`` (found once, so many starts stay linear)."""
_VL_BLOCK = re.compile(rf"Setting kv cache block size to {_INT}")
_VL_FORMAT = re.compile(r"Using (\w{1,64}) KV cache format for \w{1,64} backend")
_VL_LOADING = re.compile(rf"(?:Model loading took|Loading model weights took) {_NUM} Gi?B")
_VL_AVAILABLE = re.compile(rf"Available KV cache memory: (-?){_NUM} GiB")
_VL_OVERRIDE = re.compile(rf"Overriding num_gpu_blocks=(\d{{1,30}}) with num_gpu_blocks_override={_INT}")
_VL_DCP = re.compile(rf"Multiplying the GPU KV cache size by the dcp_world_size {_INT}")
_VL_KV_SIZE = re.compile(  # spaces after the colon: a pasted log aligned with the line above it (aws-samples' L40S)
    rf"GPU KV cache size: {{1,40}}{_TOKENS} tokens(?:, Maximum concurrency for {_TOKENS} tokens per request: {_NUM}x)?"
)
_VL_CONCURRENCY = re.compile(rf"(?<!, )Maximum concurrency for {_TOKENS} tokens per request: {_NUM}x")
_VL_MAX_LEN = re.compile(rf"Using max model len {_INT}")
_VL_ARCH = re.compile(r"Resolved architecture: (\w{1,128})")
_VL_MAXLEN_ERROR = re.compile(
    r"To serve at least one request with the models?'s max seq len \((\d{1,30})\), ?"
    rf"\(?{_NUM} GiB KV cache is needed, which is larger than the available KV cache memory \((-?{_NUM[1:-1]}) GiB\)\."
    rf"(?: ?Based on the available memory, the estimated maximum model length is {_TOKENS}\.)?"
)
_VL_HYBRID_BLOCK = re.compile(
    rf"Setting attention block size to {_INT} tokens to ensure that attention page size is >= mamba page size"
)
_VL_MAMBA_PADDING = re.compile(
    rf"Padding mamba page size by {_NUM}% to ensure that mamba page size and attention page size are exactly equal"
)
_VL_NO_MEMORY = re.compile(r"No available memory for the cache blocks")
_VL_V0_BLOCKS = re.compile(r"(?<!\w)blocks: (\d{1,30}), # CPU blocks: (\d{1,30})")
"""From the blank before ``blocks:``; the device word before it (``GPU``, ``cuda``, ``rocm``) is read with
``_VL_V0_DEVICE`` (a pattern that began with the word would try every word of a line)."""
_VL_V0_DEVICE = re.compile(r"(\w{1,16}) $")
_VL_V0_PROFILE = re.compile(r"Memory profiling results:")
"""Only the start: its ``key=valueGiB`` fields are read with ``_VL_V0_FIELD`` from there on."""
_VL_V0_FIELD = re.compile(r"(?<!\w)(\w{1,64})=(\d{1,30}(?:\.\d{1,30})?)(GiB)?")
_VL_V0_BUDGET = re.compile(
    rf"can use total_gpu_memory \({_NUM}GiB\) x gpu_memory_utilization \((\d{{1,3}}(?:\.\d{{1,30}})?)\)"
)
_VL_V0_TERMS = re.compile(
    rf"model weights take {_NUM}GiB; non_torch_memory takes {_NUM}GiB; PyTorch activation peak memory takes "
    rf"{_NUM}GiB; the rest of the memory reserved for KV Cache is (-?){_NUM}GiB"
)
_VL_V0_ROW = re.compile(
    r"(total_gpu_memory|gpu_memory_utilization|model weights take|non_torch_memory|PyTorch activation peak memory"
    r"|available_kv_cache_memory)[ \t]{1,64}(\d{1,30}(?:\.\d{1,30})?)(?:GiB)?(?![\w.])"
)
"""vLLM 0.6.5's table form of the memory profile: one 'key   value' row per line under 'Memory profiling results:'."""
_V0_ROW_FIELD = {"total_gpu_memory": "total", "gpu_memory_utilization": "utilization", "model weights take": "weights",
                 "non_torch_memory": "non_torch", "PyTorch activation peak memory": "peak",
                 "available_kv_cache_memory": "kv"}  # fmt: skip
_VL_V0_MAXLEN = re.compile(
    r"The model's max seq len \((\d{1,30})\) is larger than the maximum number of tokens that can be stored in KV "
    r"cache \((\d{1,30})\)"
)
