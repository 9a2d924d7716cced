"""The facts a log yields: rounded GiB figures, the values each line carries, and one ``Run`` per start."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

from kvplan.errors import InputError
from kvplan.runbook.long_context import LongContext
from kvplan.runbook.parse.patterns import _ARG_INT, _ARG_NUMBER
from kvplan.units import GiB

T = TypeVar("T")

LOOKED_FOR = (
    "SGLang: 'server_args=ServerArgs(', 'Load weight begin/end', 'KV Cache is allocated', 'Memory pool end', "
    "'max_total_num_tokens='; vLLM: 'Model loading took', 'Available KV cache memory', 'GPU KV cache size', "
    "'Maximum concurrency for', 'Overriding num_gpu_blocks', \"To serve at least one request with the model's "
    'max seq len"'
)


class LogError(InputError):
    """A log with nothing the doctor can read (exit 2)."""


# --------------------------------------------------------------------------- values


@dataclass(frozen=True)
class Gib:
    """A memory figure as a log prints it: ``units / 10**decimals`` GiB, rounded to that many decimals.

    SGLang prints ``{:.2f}`` and vLLM ``round(x, 2)`` (not zero-padded: ``36.1`` means 36.10), so a figure is
    exact to half a unit of its last decimal: ``low_bytes``..``high_bytes`` is every byte count that prints so.
    """

    units: int
    decimals: int
    text: str

    @classmethod
    def parse(cls, text: str, *, decimals: int = 2) -> Gib:
        whole, _, frac = text.partition(".")
        d = max(len(frac), decimals)
        return cls(int(whole or "0") * 10**d + int((frac + "0" * d)[:d] or "0"), d, text)

    @property
    def _scale(self) -> int:
        return int(10**self.decimals)

    @property
    def bytes(self) -> int:
        return self.units * GiB // self._scale

    @property
    def low_bytes(self) -> int:
        """The smallest byte count that rounds to this figure: (units − ½) / 10**decimals GiB, rounded up."""
        return max(-(-((2 * self.units - 1) * GiB) // (2 * self._scale)), 0)

    @property
    def high_bytes(self) -> int:
        """The largest byte count that rounds to this figure: (units + ½) / 10**decimals GiB, rounded down."""
        return (2 * self.units + 1) * GiB // (2 * self._scale)

    @property
    def half_unit_bytes(self) -> int:
        """The rounding tolerance: half a unit of the last printed decimal, in bytes (0.005 GiB = 5,368,709 B)."""
        return GiB // (2 * self._scale)

    def covers(self, n: int) -> bool:
        return self.low_bytes <= n <= self.high_bytes


@dataclass(frozen=True)
class At(Generic[T]):
    """A value with the log line it came from and the rank that printed it."""

    value: T
    line: int
    rank: str | None = None


@dataclass(frozen=True)
class Args:
    """``key=value`` pairs of a ServerArgs dump or a vLLM config line; values as raw Python text."""

    items: tuple[tuple[str, str], ...]

    def raw(self, key: str) -> str | None:
        for k, v in self.items:
            if k == key:
                return v
        return None

    def has(self, key: str) -> bool:
        return self.raw(key) is not None

    def text(self, key: str) -> str | None:
        """The value without quotes; None when absent or ``None``."""
        v = self.raw(key)
        if v is None or v == "None":
            return None
        if len(v) >= 2 and v[0] == v[-1] and v[0] in "'\"":
            return v[1:-1]
        return v

    def integer(self, key: str) -> int | None:
        v = self.text(key)
        if v is None or not _ARG_INT.fullmatch(v):
            return None
        return int(v)

    def number(self, key: str) -> str | None:
        """A decimal number's text (``'0.886'``), None when absent or not a number."""
        v = self.text(key)
        return v if v is not None and _ARG_NUMBER.fullmatch(v) else None

    def flag(self, key: str) -> bool | None:
        v = self.text(key)
        return {"True": True, "False": False}.get(v) if v is not None else None


@dataclass(frozen=True)
class LoadEnd:
    avail: Gib | None
    usage: Gib | None
    model_class: str | None
    dtype: str | None
    quant: str | None
    fmt: str | None = None
    """SGLang >= 0.5.x: ``quant=fp8, fmt=e4m3`` of a quantized checkpoint."""


@dataclass(frozen=True)
class KvAlloc:
    """SGLang's ``KV Cache is allocated`` line: ``tokens`` is the pool size S (per-rank rows)."""

    tokens: int
    dtype: str | None
    kv: Gib | None
    k: Gib | None = None
    v: Gib | None = None

    @property
    def mha(self) -> bool:
        return self.k is not None


@dataclass(frozen=True)
class MambaAlloc:
    """SGLang's ``Mamba Cache is allocated`` line of a linear-attention hybrid (Qwen3-Next, Qwen3.5, Kimi-Linear):
    the state pool of ``slots`` requests (the pool holds slots + 1: one padding slot), its conv and temporal (ssm)
    state tensors of one rank."""

    slots: int
    conv: Gib
    ssm: Gib


@dataclass(frozen=True)
class SwaPool:
    """SGLang's sliding-window pool sizes: ``Use sliding window memory pool. full_layer_tokens=F,
    swa_layer_tokens=S`` (``usage`` None), or ``SWAKVPool mem usage: X GB, swa size: S, full size: F``."""

    full_tokens: int
    swa_tokens: int
    usage: Gib | None = None


@dataclass(frozen=True)
class Summary:
    """SGLang's scheduler summary: ``max_total_num_tokens`` is S × dcp (the logical count)."""

    max_total_num_tokens: int
    chunked_prefill_size: int | None
    """None on SGLang 0.4.1, whose summary line has no ``chunked_prefill_size``."""
    max_prefill_tokens: int
    max_running_requests: int
    context_len: int
    available_gpu_mem: Gib | None


@dataclass(frozen=True)
class KvCacheSize:
    """vLLM's ``GPU KV cache size``: num_blocks × block × dcp (the null block included)."""

    tokens: int
    max_model_len: int | None
    """From the same line (0.33.0 prints both there); None when the line is the older one-figure form."""
    concurrency: str | None


@dataclass(frozen=True)
class Concurrency:
    max_model_len: int
    concurrency: str


@dataclass(frozen=True)
class Override:
    profiled_blocks: int
    blocks: int


@dataclass(frozen=True)
class V0Blocks:
    """vLLM V0's ``# GPU blocks: N, # CPU blocks: M`` (0.8: ``# cuda blocks``): the pool in blocks, all usable."""

    gpu_blocks: int
    cpu_blocks: int
    device: str


@dataclass(frozen=True)
class V0Memory:
    """vLLM V0's memory profile: 0.6.4 ``Memory profiling results: total_gpu_memory=… kv_cache_size=…`` on one line,
    0.6.5-0.8 ``the current vLLM instance can use total_gpu_memory (…) x gpu_memory_utilization (…)`` then
    ``model weights take …; non_torch_memory takes …; PyTorch activation peak memory takes …; the rest of the
    memory reserved for KV Cache is ….`` (GiB, ``%.2f``). A field the line does not print is None."""

    total: Gib | None = None
    utilization: str | None = None
    weights: Gib | None = None
    non_torch: Gib | None = None
    peak: Gib | None = None
    kv: Gib | None = None


@dataclass(frozen=True)
class V0MaxLenError:
    """vLLM V0's refusal: ``The model's max seq len (L) is larger than the maximum number of tokens that can be
    stored in KV cache (T)`` (T = # GPU blocks × block size)."""

    max_model_len: int
    kv_tokens: int


@dataclass(frozen=True)
class MaxLenError:
    """vLLM's startup refusal: one request of ``max_model_len`` needs more KV than there is."""

    max_model_len: int
    needed: Gib
    available: Gib
    estimated_max_len: int | None


# --------------------------------------------------------------------------- runs


@dataclass(frozen=True, kw_only=True)
class Run:
    """One server start found in the log."""

    index: int
    first_line: int
    last_line: int
    engine: str | None
    events: int
    version: At[str] | None = None
    args: At[Args] | None = None
    """SGLang's ServerArgs dump, or vLLM's engine-config line."""
    cli_args: At[Args] | None = None
    """vLLM's ``non-default args``."""
    baseline: tuple[At[Gib], ...] = ()
    load_begin: tuple[At[Gib], ...] = ()
    load_end: tuple[At[LoadEnd], ...] = ()
    kv: tuple[At[KvAlloc], ...] = ()
    """The target pool's line, one per rank."""
    draft_kv: tuple[At[KvAlloc], ...] = ()
    """A second ``KV Cache is allocated`` line from the same rank: the MTP draft pool."""
    pool_end: tuple[At[Gib], ...] = ()
    summary: At[Summary] | None = None
    page_size: At[int] | None = None
    dsa_kv_dtype: At[str] | None = None
    dsa_backends: At[tuple[str, str]] | None = None
    model_loading: tuple[At[Gib], ...] = ()
    available_kv: tuple[At[Gib], ...] = ()
    kv_cache_size: At[KvCacheSize] | None = None
    concurrency: At[Concurrency] | None = None
    dcp_multiplier: At[int] | None = None
    override: At[Override] | None = None
    block_size: At[int] | None = None
    kv_format: At[str] | None = None
    max_model_len: At[int] | None = None
    architecture: At[str] | None = None
    """vLLM's ``Resolved architecture``."""
    max_len_error: At[MaxLenError] | None = None
    errors: tuple[At[str], ...] = ()
    ranks: tuple[str, ...] = ()
    generation: str | None = None
    """vLLM's engine generation: 'V0' (``Initializing an LLM engine`` / ``a V0 LLM engine``) or 'V1'."""
    v0_blocks: At[V0Blocks] | None = None
    v0_memory: At[V0Memory] | None = None
    """The V0 memory profile, merged over its one or two lines (the line of the KV figure)."""
    v0_max_len_error: At[V0MaxLenError] | None = None
    profiling_override: At[Override] | None = None
    """vLLM >= 0.1x's ``Overriding num_gpu_blocks=0 with num_gpu_blocks_override=512`` of its profiling run with a
    dummy cache: not a user's override, and not the pool."""
    negative_profile: At[str] | None = None
    """SGLang's warning that the profiled ``max_total_num_tokens`` is negative (the weights left no room)."""
    total_tokens: At[int] | None = None
    """SGLang 0.3.x bench_latency's lone ``max_total_num_tokens=N`` (no scheduler summary line)."""
    mamba: tuple[At[MambaAlloc], ...] = ()
    """SGLang's Mamba state pool, one line per rank (a linear-attention hybrid)."""
    swa_pool: At[SwaPool] | None = None
    """SGLang's sliding-window pool sizes (a SWA hybrid); with it, the first 'KV Cache is allocated' line of a rank
    is the SWA pool (``swa_kv``) and the second the full pool (``kv``): SWAKVPool builds them in that order."""
    swa_kv: tuple[At[KvAlloc], ...] = ()
    hybrid_block: At[int] | None = None
    """vLLM's ``Setting attention block size to N tokens to ensure that attention page size is >= mamba page size``
    (a linear-attention hybrid: the attention block raised so one page holds a Mamba state page)."""
    mamba_padding: At[str] | None = None
    """vLLM's ``Padding mamba page size by X%`` (the percent as printed)."""
    long_context: At[LongContext] | None = None
    """A length above the derived one, allowed: the engine's warning or the env var (kvplan.runbook.long_context)."""

    @property
    def hybrid(self) -> str | None:
        """'linear state' or 'sliding window' when the log's own lines mark a hybrid pool, else None."""
        if self.mamba or self.hybrid_block is not None or self.mamba_padding is not None:
            return "linear state"
        if self.swa_pool is not None:
            return "sliding window"
        return None

    @property
    def complete(self) -> bool:
        """The run reached its pool lines, or stopped with a startup error the doctor can check."""
        return bool(
            self.kv
            or self.summary
            or self.available_kv
            or self.kv_cache_size
            or self.override
            or self.max_len_error
            or self.errors
            or self.v0_blocks
            or self.v0_max_len_error
            or self.negative_profile
            or self.swa_kv
            or self.mamba
            or self.total_tokens
        )

    @property
    def model_class(self) -> str | None:
        if self.architecture is not None:
            return self.architecture.value
        for e in self.load_end:
            if e.value.model_class:
                return e.value.model_class
        return None

    @property
    def model_path(self) -> str | None:
        for a in (self.args, self.cli_args):
            if a is not None:
                for key in ("model_path", "model"):
                    v = a.value.text(key)
                    if v:
                        return v
        return None


@dataclass(frozen=True)
class ParsedLog:
    source: str
    lines: int
    runs: tuple[Run, ...]

    @property
    def chosen(self) -> Run:
        """The last complete run, else the last run."""
        for run in reversed(self.runs):
            if run.complete:
                return run
        return self.runs[-1]

    @property
    def skipped_after(self) -> tuple[Run, ...]:
        """Runs after the chosen one (incomplete: a start cut off before its pool lines)."""
        return self.runs[self.chosen.index :]


def smallest(items: Iterable[At[Gib]]) -> At[Gib] | None:
    """The smallest figure over ranks (the engines size from the minimum across ranks)."""
    best: At[Gib] | None = None
    for item in items:
        if best is None or item.value.bytes < best.value.bytes:
            best = item
    return best


def largest(items: Iterable[At[Gib]]) -> At[Gib] | None:
    best: At[Gib] | None = None
    for item in items:
        if best is None or item.value.bytes > best.value.bytes:
            best = item
    return best
