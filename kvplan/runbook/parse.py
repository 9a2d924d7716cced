"""Engine startup logs -> frozen dataclasses. Pure (text in, data out) apart from ``log_lines``, which streams a
file: a regular file under ``limits.LOG``, lines cut at ``limits.MAX_LINE_CHARS``, never read whole. Every pattern
is linear in the line (bounded repeats), a record joined from wrapped lines stops growing at the line cap, and a
figure of more than 30 digits is not an engine's (the line is not recognised), so no log, however hostile, makes
the parse slower than linear or an integer too long to convert.

The lines read are the engines' exact format strings (shared/reference/sglang-0.5.23.md §6 and §10,
shared/reference/vllm-0.33.0.md §3-4):

SGLang (every "GB" it prints is GiB: ``/ (1 << 30)``):
  server_args=ServerArgs(model_path='...', tp_size=8, ..., mem_fraction_static=0.886, ...)
  Load weight begin. avail mem={:.2f} GB
  Load weight end. elapsed={:.2f} s, type={Class}, [quant=fp8, fmt=e4m3, ]avail mem={:.2f} GB, mem usage={:.2f} GB.
      (older releases: ``Load weight end. type=..., dtype=..., avail mem=..., mem usage=...``)
  KV Cache is allocated. dtype: {torch dtype}, #tokens: {S}, KV size: {:.2f} GB       (0.5.9: no ``dtype: ``)
  KV Cache is allocated. #tokens: {S}, K size: {:.2f} GB, V size: {:.2f} GB             (MHA / GQA models)
  Memory pool end. avail mem={:.2f} GB
  max_total_num_tokens={N}, chunked_prefill_size={C}, max_prefill_tokens={P}, max_running_requests={R},
      context_len={L}[, available_gpu_mem={:.2f} GB]                                     (older: no available_*)
  Setting page size to 64 for DeepSeek DSA. / Setting KV cache dtype to {dtype} for DeepSeek DSA on SM{n} device.
  Set DSA backends for {dtype} KV Cache: prefill={p}, decode={d}.                         (0.5.9: NSA)
vLLM:
  vLLM API server version {v} / non-default args: {...} /
  Initializing a V1 LLM engine (v{v}) with config: model='...', ..., max_seq_len=..., tensor_parallel_size=..., ...
  Setting kv cache block size to {n} for {backends} backend(s). / Using {fmt} KV cache format for {backend} backend.
  Model loading took {x} GiB memory and {t} seconds            (older: ``Model loading took {x:.4f} GiB and ...``)
  Available KV cache memory: {x} GiB
  Overriding num_gpu_blocks={n} with num_gpu_blocks_override={m}
  Multiplying the GPU KV cache size by the dcp_world_size {d}.
  GPU KV cache size: {N:,} tokens[, Maximum concurrency for {L:,} tokens per request: {c:.2f}x]
  To serve at least one request with the model's max seq len ({L}), ({x} GiB KV cache is needed, which is larger
      than the available KV cache memory ({y} GiB). [Based on the available memory, the estimated maximum model
      length is {n}. ]Try increasing ...

Real logs are messy, and the reader copes with:
- ANSI colour codes (with or without their ESC byte), carriage returns (progress bars), container prefixes
  (``sglang-1  | ``, ``2026-04-19 12:18:49.415 | ``);
- interleaved ranks, including two ranks' records glued on one line: a line is split at every record prefix
  (``[2026-03-01 12:00:00 TP3]``, ``(Worker_TP0 pid=12)``, ``INFO 03-01 12:00:00``);
- lines wrapped by a terminal: a line that does not begin with a record prefix continues the previous record and
  is joined to it with no separator (a terminal wrap splits words and numbers); a blank line ends a record;
- several server starts in one file: a new ``server_args=`` dump, vLLM's banner or engine-config line, a weight
  load after the pool lines, a second pool line from the same rank, or a switch of engine begins a new run. The
  doctor uses the last complete run (one that reached its pool lines or a startup error).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Generic, TypeVar

from kvplan import limits
from kvplan.errors import InputError
from kvplan.runbook.failures import SG_FAILED, SG_PROFILED, VL_FAILED, failure_message
from kvplan.runbook.long_context import LONG_ENV, SG_LONG_LEN, VL_LONG_LEN, LongContext  # noqa: F401 (line tables)
from kvplan.runbook.long_context import read as read_long_context
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


# --------------------------------------------------------------------------- records

# Every pattern here runs over untrusted lines of up to limits.MAX_LINE_CHARS, so every repeat is bounded
# ({m,n}) or stops at a character the next part needs; none can backtrack over a whole line
# (tests/runbook/test_parse_limits.py feeds each one a pathological line).
_ANSI = re.compile(
    r"\x1b\[[0-?]{0,32}[ -/]{0,8}[@-~]"  # CSI: colours, cursor moves
    r"|\x1b\][^\x07\x1b]{0,4096}(?:\x07|\x1b\\)"  # OSC
    r"|\x1b[@-Z\\-_]"  # two-byte escapes
    r"|\[\d{1,3}(?:;\d{1,3}){0,16}m"  # a colour code whose ESC byte was lost in a paste
)
_SGLANG_PREFIX = r"\[(?:\d{4}-\d\d-\d\d[ T])?\d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?P<sg>(?:[ \t][^\]\[]{0,39})?)\]"
"""SGLang's record prefix: ``[2026-03-01 12:00:00 DP1 TP2 EP2]``; 0.3.x printed the time alone (``[22:30:52 TP0]``)."""
_LEVEL = r"(?:INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL)[ \t]{1,16}\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{1,9})?"
_VLLM_PREFIX = (
    rf"\((?P<proc>[^()\s]{{1,64}}(?: [^()\s]{{1,64}})?) pid=(?P<pid>\d{{1,10}})(?:, ip=[\w.:]{{1,64}})?\)"
    rf"(?:[ \t]{{0,16}}{_LEVEL})?"
)
_START = re.compile(f"{_SGLANG_PREFIX}|{_VLLM_PREFIX}|{_LEVEL}")
_CONTAINER = re.compile(
    r"^(?:[│┃▎][ \t]{0,8}|>[ \t]{1,8}|[\w.-]{1,128}[ \t]{1,64}\|\s"
    r"|\d{4}-\d\d-\d\d[ T][\d:.,]{1,32}Z?[ \t]{0,8}\|[ \t]{0,8}"
    r"|\d{4}-\d\d-\d\dT[\d:.,]{1,32}Z?\s)"
)


@dataclass
class _Record:
    line: int
    rank: str | None
    parts: list[str]
    size: int = 0

    @property
    def text(self) -> str:
        return "".join(self.parts)

    def extend(self, more: str) -> None:
        """A terminal wrap: joined with no separator, up to ``limits.MAX_LINE_CHARS`` (the rest is dropped)."""
        room = limits.MAX_LINE_CHARS - self.size
        if room > 0:
            piece = more[:room]
            self.parts.append(piece)
            self.size += len(piece)


def _rank(m: re.Match[str]) -> str | None:
    """The process and rank a record prefix names: SGLang's ``DP1 TP2 EP2``; vLLM's process name where it carries a
    rank (``Worker_TP3``, ``EngineCore_DP0``, ``VllmWorker rank=2``), else the name and pid (``VllmWorkerProcess
    pid=106022``: V0's workers share one name), so that per-worker lines of one start are told apart."""
    sg = m.group("sg")
    if sg is not None:
        return sg.strip() or None
    proc = m.group("proc")
    if not proc:
        return None
    proc = proc.strip()
    return proc if any(c.isdigit() for c in proc) else f"{proc} pid={m.group('pid')}"


def clean_line(raw: str) -> str:
    line = _ANSI.sub("", raw[: limits.MAX_LINE_CHARS]).replace("\r", "")
    return _CONTAINER.sub("", line, count=1)


@dataclass
class _LineCount:
    lines: int = 0


def _records(lines: Iterable[str], count: _LineCount) -> Iterator[_Record]:
    """Records in log order, each yielded once no later line can extend it; linear in the log's size."""
    pending: _Record | None = None
    open_record = False
    preface = True
    for number, raw in enumerate(lines, start=1):
        count.lines = number
        line = clean_line(raw)
        if not line.strip():
            open_record = False
            continue
        if preface:
            if _is_comment(line):
                continue  # a header of comment lines before the log (a fixture's provenance, a pasted note)
            preface = False
        starts = list(_START.finditer(line))
        head_end = starts[0].start() if starts else len(line)
        head = line[:head_end]
        if head.strip():
            if open_record and pending is not None and _MESSAGE_START.match(head.lstrip()) is None:
                pending.extend(head)  # a terminal wrap: no separator
            else:
                if pending is not None:
                    yield pending
                pending = _Record(number, None, [head], len(head))
        for i, m in enumerate(starts):
            end = starts[i + 1].start() if i + 1 < len(starts) else len(line)
            if pending is not None:
                yield pending
            pending = _Record(number, _rank(m), [line[m.start() : end]], end - m.start())
        open_record = True
    if pending is not None:
        yield pending


_MESSAGE_START = re.compile(
    r"(?:ValueError: |RuntimeError: |\[[\w./-]{1,64}:\d{1,6}\] )?"
    r"(?:Loading model weights took|Model loading took|Memory profiling results|# \w{1,16} blocks: |GPU blocks: "
    r"|Maximum concurrency for|Available KV cache memory|GPU KV cache size"
    r"|The model's max seq len|To serve at least"
    r"|KV Cache is allocated|Load weight (?:begin|end)|Memory pool end|max_total_num_tokens=|server_args="
    r"|Initializing an? |the current vLLM instance|model weights take|vLLM API server version)"
)
"""A line with no record prefix that begins with an engine message is a new record (a log pasted without its
prefixes), not a terminal wrap of the previous one."""


def _is_comment(line: str) -> bool:
    """A ``#`` comment line of a preface; not V0's ``# GPU blocks: N, # CPU blocks: M`` pasted without its prefix."""
    stripped = line.lstrip()
    return stripped.startswith("#") and _VL_V0_BLOCKS.search(stripped[:200]) is None


def _split_lines(text: str) -> Iterator[str]:
    """``text.split("\\n")`` one line at a time, without a final empty line after a trailing newline."""
    start = 0
    n = len(text)
    while start < n:
        end = text.find("\n", start)
        if end < 0:
            end = n
        yield text[start:end]
        start = end + 1


def log_lines(path: Path) -> Iterator[str]:
    """The lines of a log file, streamed: a regular file only, under ``limits.LOG``, each line read with a
    bounded readline and cut at ``limits.MAX_LINE_CHARS`` bytes; bytes that are not UTF-8 become U+FFFD."""
    st = limits.check_regular(path, "log")
    cap = limits.LOG.effective()
    if st.st_size > cap:
        raise limits.LimitError(
            f"log {path}: {st.st_size:,} bytes is over kvplan's log limit of {cap:,} bytes (set {limits.LOG.env})"
        )
    line_cap = limits.MAX_LINE_CHARS
    total = 0
    number = 0
    with limits.open_regular(path, "log") as f:
        while True:
            try:
                raw = f.readline(line_cap + 1)
                total += len(raw)
                if len(raw) > line_cap and not raw.endswith(b"\n"):
                    while (rest := f.readline(line_cap)) and not rest.endswith(b"\n"):
                        total += len(rest)
                    total += len(rest)
            except OSError as e:
                raise InputError(f"log {path}:{number + 1}: cannot read: {e.strerror or e}") from None
            if not raw:
                return
            number += 1
            if total > cap:
                raise limits.LimitError(f"log {path}:{number}: over kvplan's log limit of {cap:,} bytes")
            yield raw[:line_cap].decode("utf-8", errors="replace").rstrip("\n")


# --------------------------------------------------------------------------- key=value dumps


def kv_pairs(text: str, start: int = 0) -> tuple[tuple[str, str], ...]:
    """``a=1, b='x, y', c=Foo(d=2)`` -> (('a', '1'), ('b', "'x, y'"), ('c', 'Foo(d=2)')).

    Commas split only at depth 0 outside quotes; an unmatched closing bracket ends the list (the ``)`` of
    ``ServerArgs(...)``).
    """
    parts: list[str] = []
    depth = 0
    quote = ""
    i = start
    begin = start
    n = len(text)
    while i < n:
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            if depth == 0:
                break
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[begin:i])
            begin = i + 1
        i += 1
    parts.append(text[begin:i])
    out: list[tuple[str, str]] = []
    for part in parts:
        key, sep, value = part.partition("=")
        key = key.strip()
        if sep and key.isidentifier():
            out.append((key, value.strip()))
    return tuple(out)


def _dict_pairs(text: str) -> tuple[tuple[str, str], ...]:
    """vLLM's ``non-default args: {...}`` as key/raw-value pairs (literal_eval, else a lenient regex)."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        value = None
    if isinstance(value, dict):
        return tuple((str(k), repr(v)) for k, v in value.items())
    return tuple((m.group(1), m.group(2).strip()) for m in _DICT_ITEM.finditer(text))


# --------------------------------------------------------------------------- events

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
_VL_KV_SIZE = re.compile(
    rf"GPU KV cache size: {_TOKENS} tokens(?:, Maximum concurrency for {_TOKENS} tokens per request: {_NUM}x)?"
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

CONFIG = "config"
LOAD = "load"
POOL = "pool"
_PHASE = {
    "args": CONFIG,
    "version": CONFIG,
    "engine_config": CONFIG,
    "cli_args": CONFIG,
    "baseline": LOAD,
    "load_begin": LOAD,
    "load_end": LOAD,
    "model_loading": LOAD,
    "kv": POOL,
    "pool_end": POOL,
    "summary": POOL,
    "available": POOL,
    "kv_size": POOL,
    "concurrency": POOL,
    "override": POOL,
    "dcp": POOL,
    "maxlen_error": POOL,
    "error": POOL,
    "kv_sizes": POOL,
    "v0_blocks": POOL,
    "v0_profile": POOL,
    "v0_budget": POOL,
    "v0_terms": POOL,
    "v0_maxlen_error": POOL,
    "negative_profile": POOL,
    "v0_row": POOL,
    "mamba": POOL,
    "total_tokens": POOL,
    "swa_sizes": POOL,
    "swa_pool": POOL,
    "hybrid_block": CONFIG,
    "mamba_padding": CONFIG,
    "long_context": CONFIG,
    "page": CONFIG,
    "dsa_dtype": CONFIG,
    "dsa_backends": CONFIG,
}
_RESTART_ON_REPEAT = {"args", "version", "engine_config", "cli_args", "load_begin", "load_end", "model_loading",
                      "summary", "available", "kv_size", "override", "pool_end", "v0_blocks", "v0_profile",
                      "v0_budget", "v0_terms"}  # fmt: skip
_SAME_AGAIN = {"kv_size", "available"}
"""vLLM's pool lines repeated with the same figure and no load line between: one start printed twice."""
_NEUTRAL = {"profiling_override"}
"""Kinds that never begin a new start (a line printed inside another phase)."""
_QUOTES = "'\"`‘“«"


@dataclass(frozen=True)
class _Event:
    kind: str
    engine: str
    pos: int
    line: int
    rank: str | None
    value: object


def _g(text: str) -> Gib:
    return Gib.parse(text)


def _tok(text: str) -> int:
    return int(text.replace(",", ""))


def _events(rec: _Record) -> list[_Event]:
    t = rec.text
    out: list[_Event] = []

    def add(kind: str, engine: str, m: re.Match[str], value: object) -> None:
        if m.start() > 0 and t[m.start() - 1] in _QUOTES:
            return  # a line quoted inside another one (a note, an issue title, a header): not an event
        out.append(_Event(kind, engine, m.start(), rec.line, rec.rank, value))

    sg, vl = "sglang", "vllm"
    for m in _SG_ARGS.finditer(t):
        add("args", sg, m, Args(kv_pairs(t, m.end())))
    for m in _SG_BASELINE.finditer(t):
        add("baseline", sg, m, _g(m.group(1)))
    for m in _SG_LOAD_BEGIN.finditer(t):
        add("load_begin", sg, m, _g(m.group(1)))
    for m in _SG_LOAD_END.finditer(t):
        body = m.group(1)
        avail = _LOAD_AVAIL.search(body)
        usage = _LOAD_USAGE.search(body)
        cls = _LOAD_TYPE.search(body)
        dtype = _LOAD_DTYPE.search(body)
        quant = _LOAD_QUANT.search(body)
        add(
            "load_end",
            sg,
            m,
            LoadEnd(
                avail=_g(avail.group(1)) if avail else None,
                usage=_g(usage.group(1)) if usage else None,
                model_class=cls.group(1) if cls else None,
                dtype=dtype.group(1) if dtype else None,
                quant=quant.group(1) if quant else None,
            ),
        )
    for m in _SG_KV.finditer(t):
        kv, k, v = m.group(3), m.group(4), m.group(5)
        alloc = KvAlloc(
            tokens=int(m.group("tokens") or 0),
            dtype=m.group("dtype"),
            kv=_g(kv) if kv else None,
            k=_g(k) if k else None,
            v=_g(v) if v else None,
        )
        add("kv" if m.group("tokens") else "kv_sizes", sg, m, alloc)
    for m in _SG_POOL_END.finditer(t):
        add("pool_end", sg, m, _g(m.group(1)))
    for m in _SG_SUMMARY.finditer(t):
        add(
            "summary",
            sg,
            m,
            Summary(
                max_total_num_tokens=int(m.group(1)),
                chunked_prefill_size=int(m.group(2)) if m.group(2) is not None else None,
                max_prefill_tokens=int(m.group(3)),
                max_running_requests=int(m.group(4)),
                context_len=int(m.group(5)),
                available_gpu_mem=_g(m.group(6)) if m.group(6) else None,
            ),
        )
    for m in _SG_PAGE.finditer(t):
        add("page", sg, m, int(m.group(1)))
    for m in _SG_KV_DTYPE.finditer(t):
        add("dsa_dtype", sg, m, m.group(1))
    for m in _SG_BACKENDS.finditer(t):
        add("dsa_backends", sg, m, (m.group(1), m.group(2)))
    for m in _SG_ERROR.finditer(t):
        add("error", sg, m, m.group(0))
    for m in SG_PROFILED.finditer(t):
        if int(m.group(2)) <= 0:  # no pool at all: the start fails right after (a pool outcome, not a cut log)
            add("negative_profile", sg, m, m.group(0))
    for m in SG_FAILED.finditer(t):
        add("error", sg, m, failure_message(sg, m.group(0)))
    for m in VL_FAILED.finditer(t):
        add("error", vl, m, failure_message(vl, m.group(0)))
    for m, kind, engine, value in read_long_context(t):
        add(kind, engine, m, value)
    for m in _SG_NEGATIVE.finditer(t):
        add("negative_profile", sg, m, m.group(0))
    for m in _SG_TOTAL.finditer(t):
        add("total_tokens", sg, m, int(m.group(1)))
    for m in _SG_MAMBA.finditer(t):
        add("mamba", sg, m, MambaAlloc(int(m.group(1)), _g(m.group(2)), _g(m.group(3))))
    for m in _SG_SWA_SIZES.finditer(t):
        add("swa_sizes", sg, m, SwaPool(int(m.group(1)), int(m.group(2))))
    for m in _SG_SWA_POOL.finditer(t):
        add("swa_pool", sg, m, SwaPool(int(m.group(3)), int(m.group(2)), _g(m.group(1))))

    for m in _VL_VERSION.finditer(t):
        add("version", vl, m, m.group(1))
    for m in _VL_BANNER.finditer(t):
        add("version", vl, m, m.group(1))
    for m in _VL_ENGINE.finditer(t):
        gen = m.group("gen") or "V0"  # "Initializing an LLM engine (v0.6.4.post1)": V0 before 0.9 named itself
        add("engine_config", vl, m, (m.group("v"), Args(kv_pairs(m.group("cfg"))), gen))
    m_nd = _VL_NON_DEFAULT.search(t)
    if m_nd is not None:
        close = t.rfind("}")
        if close >= m_nd.end():
            add("cli_args", vl, m_nd, Args(_dict_pairs(t[m_nd.end() - 1 : close + 1])))
    for m in _VL_BLOCK.finditer(t):
        add("block", vl, m, int(m.group(1)))
    for m in _VL_FORMAT.finditer(t):
        add("format", vl, m, m.group(1))
    for m in _VL_LOADING.finditer(t):
        add("model_loading", vl, m, _g(m.group(1)))
    for m in _VL_AVAILABLE.finditer(t):
        if m.group(1):
            add("error", vl, m, f"Available KV cache memory: -{m.group(2)} GiB (the weights and activations left none)")
        else:
            add("available", vl, m, _g(m.group(2)))
    for m in _VL_OVERRIDE.finditer(t):
        o = Override(int(m.group(1)), int(m.group(2)))
        add("profiling_override" if o.profiled_blocks == 0 else "override", vl, m, o)
    for m in _VL_DCP.finditer(t):
        add("dcp", vl, m, int(m.group(1)))
    for m in _VL_KV_SIZE.finditer(t):
        add(
            "kv_size",
            vl,
            m,
            KvCacheSize(
                tokens=_tok(m.group(1)),
                max_model_len=_tok(m.group(2)) if m.group(2) else None,
                concurrency=m.group(3),
            ),
        )
    for m in _VL_CONCURRENCY.finditer(t):
        add("concurrency", vl, m, Concurrency(_tok(m.group(1)), m.group(2)))
    for m in _VL_MAX_LEN.finditer(t):
        add("max_len", vl, m, int(m.group(1)))
    for m in _VL_ARCH.finditer(t):
        add("architecture", vl, m, m.group(1))
    for m in _VL_MAXLEN_ERROR.finditer(t):
        add(
            "maxlen_error",
            vl,
            m,
            MaxLenError(
                max_model_len=int(m.group(1)),
                needed=_g(m.group(2)),
                available=_g(m.group(3).lstrip("-")),
                estimated_max_len=_tok(m.group(4)) if m.group(4) else None,
            ),
        )
    for m in _VL_HYBRID_BLOCK.finditer(t):
        add("hybrid_block", vl, m, int(m.group(1)))
    for m in _VL_MAMBA_PADDING.finditer(t):
        add("mamba_padding", vl, m, m.group(1))
    for m in _VL_NO_MEMORY.finditer(t):
        add("error", vl, m, m.group(0))
    for m in _VL_V0_BLOCKS.finditer(t):
        word = _VL_V0_DEVICE.search(t, max(m.start() - 16, 0), m.start())
        add("v0_blocks", vl, m, V0Blocks(int(m.group(1)), int(m.group(2)), word.group(1) if word else "GPU"))
    for m in _VL_V0_PROFILE.finditer(t):
        add("v0_profile", vl, m, _v0_profile(t, m.end()))
    for m in _VL_V0_BUDGET.finditer(t):
        add("v0_budget", vl, m, V0Memory(total=_g(m.group(1)), utilization=m.group(2)))
    for m in _VL_V0_TERMS.finditer(t):
        kv_text = ("-" if m.group(4) else "") + m.group(5)
        add("v0_terms", vl, m, V0Memory(weights=_g(m.group(1)), non_torch=_g(m.group(2)), peak=_g(m.group(3)),
                                         kv=None if m.group(4) else _g(kv_text)))  # fmt: skip
        if m.group(4):
            add("error", vl, m, f"the rest of the memory reserved for KV Cache is {kv_text} GiB")
    for m in _VL_V0_ROW.finditer(t):
        key = _V0_ROW_FIELD[m.group(1)]
        g = _g(m.group(2))
        row = {
            "utilization": V0Memory(utilization=m.group(2)),
            "total": V0Memory(total=g),
            "weights": V0Memory(weights=g),
            "non_torch": V0Memory(non_torch=g),
            "peak": V0Memory(peak=g),
        }.get(key, V0Memory(kv=g))
        add("v0_row", vl, m, row)
    for m in _VL_V0_MAXLEN.finditer(t):
        add("v0_maxlen_error", vl, m, V0MaxLenError(int(m.group(1)), int(m.group(2))))
    out.sort(key=lambda e: e.pos)
    return out


def _v0_profile(t: str, start: int) -> V0Memory:
    """The ``key=value[GiB]`` fields after ``Memory profiling results: `` (up to 4 KiB of them)."""
    fields = {m.group(1): m.group(2) for m in _VL_V0_FIELD.finditer(t, start, min(len(t), start + 4096))}

    def gib(key: str) -> Gib | None:
        v = fields.get(key)
        return _g(v) if v is not None else None

    return V0Memory(
        total=gib("total_gpu_memory"),
        utilization=fields.get("gpu_memory_utilization"),
        peak=gib("peak_torch_memory"),
        non_torch=gib("non_torch_memory"),
        kv=gib("kv_cache_size"),
    )


# --------------------------------------------------------------------------- runs from events


@dataclass
class _Builder:
    first_line: int
    engine: str | None = None
    events: list[_Event] = field(default_factory=list)
    seen: set[tuple[str, str | None]] = field(default_factory=set)
    phases: set[str] = field(default_factory=set)
    kv_per_rank: dict[str | None, int] = field(default_factory=dict)
    kv_mha: bool | None = None
    """Whether this run's pool lines are K/V (MHA/GQA) ones; every pool line of one start is the same kind."""
    last: dict[tuple[str, str | None], object] = field(default_factory=dict)

    def restarts(self, ev: _Event) -> bool:
        """Whether this event belongs to a new server start."""
        if not self.events:
            return False
        if self.engine is not None and ev.engine != self.engine and ev.kind in _PHASE:
            return True
        phase = _PHASE.get(ev.kind, CONFIG)
        if phase == CONFIG and POOL in self.phases:
            return True  # configuration lines (a dump, a banner, a page/dtype/backend choice) after the pool
        if phase == LOAD and POOL in self.phases:
            return True  # weights load again after the pool: a restart
        if ev.kind in _NEUTRAL:
            return False
        if ev.kind == "maxlen_error" and ("kv_size", ev.rank) in self.seen:
            return True  # V1 refuses before it prints 'GPU KV cache size': a refusal after one is another start
        if ev.kind == "kv":
            if self.kv_mha is not None and isinstance(ev.value, KvAlloc) and ev.value.mha != self.kv_mha:
                return True  # a K/V pool line after an MLA one (or back): another model's start
            return self.kv_per_rank.get(ev.rank, 0) >= 2  # target + draft per rank; a third is a new start
        if ev.kind in _SAME_AGAIN and self.last.get((ev.kind, ev.rank), ev) == ev.value:
            return False  # the same figure again (vLLM 0.10 prints its pool pair once a worker at tp 2): one start
        return ev.kind in _RESTART_ON_REPEAT and (ev.kind, ev.rank) in self.seen

    def add(self, ev: _Event) -> None:
        self.last[(ev.kind, ev.rank)] = ev.value
        self.events.append(ev)
        if ev.kind in _PHASE:
            self.engine = self.engine or ev.engine
            self.phases.add(_PHASE[ev.kind])
        self.seen.add((ev.kind, ev.rank))
        if ev.kind == "kv":
            self.kv_per_rank[ev.rank] = self.kv_per_rank.get(ev.rank, 0) + 1
            if self.kv_mha is None and isinstance(ev.value, KvAlloc):
                self.kv_mha = ev.value.mha

    def freeze(self, index: int) -> Run:
        def all_of(kind: str) -> list[_Event]:
            return [e for e in self.events if e.kind == kind]

        def first(kind: str) -> _Event | None:
            items = all_of(kind)
            return items[0] if items else None

        def at(e: _Event | None, value: T) -> At[T] | None:
            return None if e is None else At(value, e.line, e.rank)

        def ats(kind: str) -> tuple[At[Gib], ...]:
            return tuple(At(e.value, e.line, e.rank) for e in all_of(kind) if isinstance(e.value, Gib))

        kv: list[At[KvAlloc]] = []
        draft: list[At[KvAlloc]] = []
        targets: set[str | None] = set()
        summary = first("summary")
        kv_events = all_of("kv")
        if not kv_events and summary is not None and isinstance(summary.value, Summary):
            # SGLang 0.4.1 prints "KV Cache is allocated. K size: …, V size: …." with no #tokens: its rows are the
            # summary's max_total_num_tokens (no dcp then)
            rows = summary.value.max_total_num_tokens
            kv_events = [replace(e, value=replace(e.value, tokens=rows)) for e in all_of("kv_sizes")
                         if isinstance(e.value, KvAlloc)]  # fmt: skip
        swa_marks = [
            e.value for e in self.events if e.kind in ("swa_sizes", "swa_pool") and isinstance(e.value, SwaPool)
        ]
        swa_kv: list[At[KvAlloc]] = []
        full_sig = _full_signatures(kv_events) if swa_marks else set()
        for e in kv_events:
            assert isinstance(e.value, KvAlloc)
            if swa_marks:
                # SWAKVPool prints its SWA pool first, its full pool second (per rank): with two sizes the count says
                # which one a line is; with equal sizes the K/V sizes of a rank's second line do (a rank's first
                # line may be cut from an excerpt), else the order
                sizes = swa_marks[0]
                if sizes.full_tokens != sizes.swa_tokens and e.value.tokens in (sizes.full_tokens, sizes.swa_tokens):
                    is_swa = e.value.tokens == sizes.swa_tokens
                elif full_sig:
                    is_swa = _signature(e.value) not in full_sig
                else:
                    is_swa = e.rank not in targets
                (swa_kv if is_swa else kv).append(At(e.value, e.line, e.rank))
                targets.add(e.rank)
                continue
            (draft if e.rank in targets else kv).append(At(e.value, e.line, e.rank))
            targets.add(e.rank)
        args = first("args")
        engine_config = first("engine_config")
        version = first("version")
        version_text: str | None = str(version.value) if version else None
        config_args: At[Args] | None = None
        if args is not None and isinstance(args.value, Args):
            config_args = At(args.value, args.line, args.rank)
        generation: str | None = None
        if engine_config is not None and isinstance(engine_config.value, tuple):
            v, cfg, generation = engine_config.value
            if config_args is None:
                config_args = At(cfg, engine_config.line, engine_config.rank)
            if v is not None:
                version_text = version_text or str(v)
                version = version or engine_config
        cli = first("cli_args")
        kv_size = first("kv_size")
        concurrency = first("concurrency")
        override = first("override")
        maxlen = first("maxlen_error")
        lines = [e.line for e in self.events]
        ranks = tuple(dict.fromkeys(e.rank for e in self.events if e.rank is not None))
        return Run(
            index=index,
            first_line=min(lines),
            last_line=max(lines),
            engine=self.engine,
            events=len(self.events),
            version=At(version_text, version.line, version.rank) if version and version_text else None,
            args=config_args,
            cli_args=at(cli, cli.value) if cli is not None and isinstance(cli.value, Args) else None,
            baseline=ats("baseline"),
            load_begin=ats("load_begin"),
            load_end=tuple(At(e.value, e.line, e.rank) for e in all_of("load_end") if isinstance(e.value, LoadEnd)),
            kv=tuple(kv),
            draft_kv=tuple(draft),
            pool_end=ats("pool_end"),
            summary=at(summary, summary.value) if summary and isinstance(summary.value, Summary) else None,
            page_size=_int_at(first("page")),
            dsa_kv_dtype=_str_at(first("dsa_dtype")),
            dsa_backends=_pair_at(first("dsa_backends")),
            model_loading=ats("model_loading"),
            available_kv=ats("available"),
            kv_cache_size=at(kv_size, kv_size.value) if kv_size and isinstance(kv_size.value, KvCacheSize) else None,
            concurrency=(
                at(concurrency, concurrency.value)
                if concurrency and isinstance(concurrency.value, Concurrency)
                else None
            ),
            dcp_multiplier=_int_at(first("dcp")),
            override=at(override, override.value) if override and isinstance(override.value, Override) else None,
            block_size=_int_at(first("block")),
            kv_format=_str_at(first("format")),
            max_model_len=_int_at(first("max_len")),
            architecture=_str_at(first("architecture")),
            max_len_error=at(maxlen, maxlen.value) if maxlen and isinstance(maxlen.value, MaxLenError) else None,
            errors=tuple(At(str(e.value), e.line, e.rank) for e in all_of("error")),
            ranks=ranks,
            generation=generation,
            v0_blocks=_typed(first("v0_blocks"), V0Blocks),
            v0_memory=self._v0_memory(),
            v0_max_len_error=_typed(first("v0_maxlen_error"), V0MaxLenError),
            profiling_override=_typed(first("profiling_override"), Override),
            negative_profile=_str_at(first("negative_profile")),
            total_tokens=_int_at(first("total_tokens")),
            mamba=tuple(At(e.value, e.line, e.rank) for e in all_of("mamba") if isinstance(e.value, MambaAlloc)),
            swa_pool=self._swa_pool(),
            swa_kv=tuple(swa_kv),
            hybrid_block=_int_at(first("hybrid_block")),
            mamba_padding=_str_at(first("mamba_padding")),
            long_context=_typed(first("long_context"), LongContext),
        )

    def _swa_pool(self) -> At[SwaPool] | None:
        """The SWA pool sizes, with the ``SWAKVPool mem usage`` figure where the log prints it."""
        sizes = [e for e in self.events if e.kind in ("swa_sizes", "swa_pool") and isinstance(e.value, SwaPool)]
        if not sizes:
            return None
        usage = next((e for e in sizes if isinstance(e.value, SwaPool) and e.value.usage is not None), None)
        e = usage or sizes[0]
        assert isinstance(e.value, SwaPool)
        return At(e.value, e.line, e.rank)

    def _v0_memory(self) -> At[V0Memory] | None:
        """V0's memory figures merged over its profile lines (0.6.5+: two lines), at the line with the KV figure."""
        parts = [e for e in self.events if e.kind in ("v0_profile", "v0_budget", "v0_terms", "v0_row")]
        if not parts:
            return None
        merged: dict[str, object] = {}
        line, rank = parts[-1].line, parts[-1].rank
        for e in parts:
            assert isinstance(e.value, V0Memory)
            for k, v in vars(e.value).items():
                if v is not None:
                    merged[k] = v
            if e.value.kv is not None:
                line, rank = e.line, e.rank
        return At(V0Memory(**merged), line, rank)  # type: ignore[arg-type]


def _signature(a: KvAlloc) -> tuple[str | None, ...]:
    return tuple(g.text if g is not None else None for g in (a.kv, a.k, a.v))


def _full_signatures(events: list[_Event]) -> set[tuple[str | None, ...]]:
    """The K/V sizes of the full pool of a SWA hybrid: a rank's second 'KV Cache is allocated' line."""
    seen: dict[str | None, int] = {}
    out: set[tuple[str | None, ...]] = set()
    for e in events:
        if isinstance(e.value, KvAlloc):
            seen[e.rank] = seen.get(e.rank, 0) + 1
            if seen[e.rank] == 2:
                out.add(_signature(e.value))
    return out


def _typed(e: _Event | None, kind: type[T]) -> At[T] | None:
    return At(e.value, e.line, e.rank) if e is not None and isinstance(e.value, kind) else None


def _int_at(e: _Event | None) -> At[int] | None:
    return At(e.value, e.line, e.rank) if e is not None and isinstance(e.value, int) else None


def _str_at(e: _Event | None) -> At[str] | None:
    return At(e.value, e.line, e.rank) if e is not None and isinstance(e.value, str) else None


def _pair_at(e: _Event | None) -> At[tuple[str, str]] | None:
    if e is None or not isinstance(e.value, tuple):
        return None
    a, b = e.value
    return At((str(a), str(b)), e.line, e.rank)


def parse_log(text: str | Iterable[str], source: str = "log") -> ParsedLog:
    """Every server start in ``text`` (the whole log, or its lines one by one, as ``log_lines`` streams them);
    raises LogError when nothing is recognisable."""
    count = _LineCount()
    lines = _split_lines(text) if isinstance(text, str) else text
    runs: list[Run] = []
    builder: _Builder | None = None
    for rec in _records(lines, count):
        for ev in _events(rec):
            if builder is None or builder.restarts(ev):
                if builder is not None:
                    runs.append(builder.freeze(len(runs) + 1))
                builder = _Builder(ev.line)
            builder.add(ev)
    if builder is not None and builder.events:
        runs.append(builder.freeze(len(runs) + 1))
    runs = [r for r in runs if r.engine is not None]
    if not runs:
        raise LogError(f"{source}: no engine startup lines recognised; looked for {LOOKED_FOR}")
    return ParsedLog(source, count.lines, tuple(_renumber(runs)))


def _renumber(runs: list[Run]) -> list[Run]:
    return [replace(r, index=i) for i, r in enumerate(runs, start=1)]


# --------------------------------------------------------------------------- the line tables


@dataclass(frozen=True)
class LineForm:
    """One engine line the parser reads: the event it yields, the pattern (a module-level name above), the engine
    versions that print it, and an example. ``source`` names the log in tests/data/logs/ (or ../shared/logs/) whose
    text holds ``example`` verbatim; ``format:`` + a path means no public log of that form is in the repo yet and
    the example is the engine's format string filled in."""

    kind: str
    pattern: str
    versions: str
    example: str
    source: str


_F = "field/"
SGLANG_LINES: tuple[LineForm, ...] = (
    LineForm("args", "_SG_ARGS", "0.3 - 0.5.x",
             "[2026-02-26 16:30:34] server_args=ServerArgs(model_path='moonshotai/Kimi-K2.5', ",
             _F + "sglang-kimi-k2.5-mi355x-ajith-sirra-amd-issues.log"),
    LineForm("load_begin", "_SG_LOAD_BEGIN", "0.3 - 0.5.x",
             "[2026-02-26 16:31:00 TP7] Load weight begin. avail mem=283.68 GB",
             _F + "sglang-kimi-k2.5-mi355x-ajith-sirra-amd-issues.log"),
    LineForm("load_end", "_SG_LOAD_END", "0.3 - 0.4.x (type, dtype, avail mem)",
             "[2025-01-09 21:45:17 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, "
             "avail mem=63.72 GB",
             _F + "sglang-llama-3.1-8b-h100-sgl-docs-notebook.log"),
    LineForm("load_end", "_SG_LOAD_END", "0.4.x - 0.5.x (elapsed, mem usage)",
             "[2026-02-26 16:41:05 TP1] Load weight end. elapsed=605.50 s, type=KimiK25ForConditionalGeneration, "
             "dtype=torch.bfloat16, avail mem=210.38 GB, mem usage=73.58 GB.",
             _F + "sglang-kimi-k2.5-mi355x-ajith-sirra-amd-issues.log"),
    LineForm("load_end", "_SG_LOAD_END", "0.5.x with a quantized checkpoint (quant=, fmt=)",
             "Load weight end. elapsed=312.45 s, type=GlmMoeDsaForCausalLM, quant=fp8, fmt=e4m3, avail mem=44.34 GB, "
             "mem usage=94.46 GB.",
             "format: shared/reference/sglang-0.5.23.md §6 (model_runner.py load_model)"),
    LineForm("kv_sizes", "_SG_KV", "0.4.1 (K/V sizes, no #tokens; rows from the summary line)",
             "[2025-01-23 19:35:20 TP0] KV Cache is allocated. K size: 27.13 GB, V size: 27.13 GB.",
             "doctor-sglang-0.4.1-llama-3.1-8b-h100-docs-clipping.log"),
    LineForm("kv", "_SG_KV", "0.4.2 - 0.5.x, MHA/GQA (#tokens, K size, V size)",
             "KV Cache is allocated. #tokens: 367404, K size: 8.23 GB, V size: 8.23 GB",
             _F + "sglang-qwen3-235b-a22b-fp8-h100-vllm-issue-21348.log"),
    LineForm("kv", "_SG_KV", "0.4.x - 0.5.9, MLA/DSA (#tokens, KV size)",
             "[2026-02-26 16:41:18 TP6] KV Cache is allocated. #tokens: 2454421, KV size: 160.63 GB",
             _F + "sglang-kimi-k2.5-mi355x-ajith-sirra-amd-issues.log"),
    LineForm("kv", "_SG_KV", "0.5.10 - 0.5.23, MLA/DSA (dtype: first)",
             "KV Cache is allocated. dtype: torch.float8_e4m3fn, #tokens: 1462784, KV size: 54.52 GB",
             "format: shared/reference/sglang-0.5.23.md §6 (memory_pool.py MLATokenToKVPool)"),
    LineForm("pool_end", "_SG_POOL_END", "0.3 - 0.5.x",
             "[2025-10-07 22:29:11 DP0 TP0] Memory pool end. avail mem=15.38 GB",
             _F + "sglang-deepseek-v3.2-exp-b200-sglang-pr-11309-main.log"),
    LineForm("summary", "_SG_SUMMARY", "0.4.1 (no chunked_prefill_size)",
             "[2025-01-09 21:45:23 TP0] max_total_num_tokens=444500, max_prefill_tokens=16384, "
             "max_running_requests=2049, context_len=131072",
             _F + "sglang-llama-3.1-8b-h100-sgl-docs-notebook.log"),
    LineForm("summary", "_SG_SUMMARY", "0.4.2 - 0.5.x (chunked_prefill_size; available_gpu_mem from 0.4.4)",
             "[2025-07-14 05:49:02] max_total_num_tokens=38141, chunked_prefill_size=2048, max_prefill_tokens=16384, "
             "max_running_requests=2048, context_len=131072, available_gpu_mem=0.83 GB",
             _F + "sglang-llama-3.1-8b-24gb-maxuhl98-thesis.log"),
    LineForm("page", "_SG_PAGE", "0.5.3 - 0.5.23 (DSA; also the deepseek-v4 builds)",
             "[2026-05-01 15:16:08] WARNING server_args.py:1261: Setting page size to 64 for DeepSeek DSA.",
             "doctor-sglang-dsv4-build-deepseek-v3.2-dsa-lines-ktransformers-1969.log"),
    LineForm("dsa_dtype", "_SG_KV_DTYPE", "0.5.3 - 0.5.23 (DSA: fp8 on SM100, bfloat16 on SM8x/SM90)",
             "Setting KV cache dtype to bfloat16 for DeepSeek DSA on SM8 device.",
             "doctor-sglang-dsv4-build-deepseek-v3.2-dsa-lines-ktransformers-1969.log"),
    LineForm("dsa_backends", "_SG_BACKENDS", "0.5.3 - 0.5.23 (NSA until 0.5.9)",
             "Set NSA backends for bfloat16 KV Cache: prefill=flashmla_sparse, decode=fa3.",
             "doctor-sglang-dsv4-build-deepseek-v3.2-dsa-lines-ktransformers-1969.log"),
    LineForm("error", "_SG_ERROR", "0.1 - 0.5.x (a failed start)",
             "Not enough memory. Please try to increase --mem-fraction-static. Current value: "
             "self.server_args.mem_fraction_static=0.8",
             "format: python/sglang/srt/model_executor/model_runner_kv_cache_mixin.py init_memory"),
    LineForm("negative_profile", "SG_PROFILED", "0.4.x - 0.5.x (a --max-total-tokens above a profiled pool <= 0)",
             "max_total_tokens=131072 is larger than the profiled value -561981. Use the profiled value instead.",
             "doctor-sglang-0.4.8-negative-profiled-value-deepseek-r1-mi300x-issue-7691.log"),
    LineForm("error", "SG_FAILED", "0.3 - 0.5.x (a start that died, e.g. in CUDA-graph capture after the pool)",
             "Scheduler hit an exception: Traceback (most recent call last):",
             "doctor-sglang-qwen3-cuda-graph-capture-exception-after-pool-issue-7227.log"),
    LineForm("total_tokens", "_SG_TOTAL", "0.3.x bench_latency (the pool alone on a line; records '[HH:MM:SS TP0]')",
             "max_total_num_tokens=1256440", "doctor-sglang-0.3-llama-3-8b-mi300x-rocm-bench-latency-augmxnt.log"),
    LineForm("mamba", "_SG_MAMBA", "0.5.x, linear-attention hybrids (Qwen3-Next, Qwen3.5, Kimi-Linear)",
             "[2026-02-27 17:10:28 TP0] Mamba Cache is allocated. max_mamba_cache_size: 82, conv_state size: 0.13GB, "
             "ssm_state size: 7.29GB",
             "doctor-sglang-hybrid-gdn-qwen3.5-moe-tp2-ktransformers-1870.log"),
    LineForm("swa_sizes", "_SG_SWA_SIZES", "0.5.x, sliding-window hybrids (gpt-oss, MiMo-V2-Flash)",
             "[2026-01-31 13:50:39 TP2] Use sliding window memory pool. full_layer_tokens=375360, "
             "swa_layer_tokens=300288",
             "doctor-sglang-hybrid-swa-pool-sizes-mimo-v2-flash-sglang-pr-18039.log"),
    LineForm("swa_pool", "_SG_SWA_POOL", "0.5.x, sliding-window hybrids (after the pool's two K/V lines a rank)",
             "[2025-12-19 07:42:57 TP2] SWAKVPool mem usage: 77.63 GB, swa size: 1496958, full size: 1496958",
             "doctor-sglang-hybrid-swa-mimo-v2-flash-tp4-sglang-pr-15464.log"),
    LineForm("negative_profile", "_SG_NEGATIVE", "0.5.x (a warning before the failed start)",
             "max_total_num_tokens=-1234 is negative",
             "format: the issue's wording (no public log of it found: a start whose weights leave no room)"),
    LineForm("long_context", "SG_LONG_LEN", "0.4 - 0.5.x (SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1: a warning)",
             "Warning: User-specified context_length (131072) is greater than the derived context_length (40960). "
             "This may lead to incorrect model outputs or CUDA errors. Note that the derived context_length may "
             "differ from max_position_embeddings in the model's config.",
             "format: python/sglang/srt/configs/model_config.py ModelConfig._derive_context_length"),
)  # fmt: skip
VLLM_LINES: tuple[LineForm, ...] = (
    LineForm("version", "_VL_VERSION", "0.5 - 0.10", "vLLM API server version 0.19.0",
             "format: vllm/entrypoints/openai/api_server.py"),
    LineForm("version", "_VL_BANNER", "0.11 - 0.33 (the start-up banner)",
             "(APIServer pid=1) INFO 04-22 01:04:39 [entrypoints/utils.py:299]  ▄▄ ▄█ █     █     █ ▀▄▀ █  "
             "version 0.19.0",
             _F + "vllm-qwen3-8b-h100-llmd-planner-tp1-profiling-override.log"),
    LineForm("engine_config", "_VL_ENGINE", "V0 0.4 - 0.8 ('an LLM engine')",
             "INFO 04-28 04:07:48 llm_engine.py:249] Initializing an LLM engine (v0.6.4.post1) with config: "
             "model='realtreetune/rho-1b-sft-GSM8K'",
             _F + "vllm-v0-rho-1b-h200-grpocredit-0.6.4.log"),
    LineForm("engine_config", "_VL_ENGINE", "V1 0.8 - 0.33 ('a V1 LLM engine'; 0.9-0.10's V0 fallback: 'a V0')",
             "(EngineCore pid=243) INFO 04-22 01:04:50 [v1/engine/core.py:105] Initializing a V1 LLM engine "
             "(v0.19.0) with config: model='Qwen/Qwen3-8B'",
             _F + "vllm-qwen3-8b-h100-llmd-planner-tp1-profiling-override.log"),
    LineForm("cli_args", "_VL_NON_DEFAULT", "0.8 - 0.33",
             "non-default args: {'model_tag': 'Qwen/Qwen3-8B', 'model': 'Qwen/Qwen3-8B', 'max_model_len': 8192, "
             "'gpu_memory_utilization': 0.95, 'enable_prefix_caching': False}",
             _F + "vllm-qwen3-8b-h100-llmd-planner-tp1-profiling-override.log"),
    LineForm("model_loading", "_VL_LOADING", "V0 0.4 - 0.8 ('Loading model weights took X GB', GiB)",
             "Loading model weights took 14.9888 GB", "doctor-vllm-v0-llama-3.1-8b-rtx3090-issue-10517.log"),
    LineForm("model_loading", "_VL_LOADING", "V1 0.8 - 0.33",
             "Model loading took 15.27 GiB memory and 15.294531 seconds",
             _F + "vllm-qwen3-8b-h100-llmd-planner-tp1-profiling-override.log"),
    LineForm("v0_profile", "_VL_V0_PROFILE", "V0 0.6.4 (one line)",
             "Memory profiling results: total_gpu_memory=23.58GiB initial_memory_usage=15.34GiB "
             "peak_torch_memory=17.98GiB memory_usage_post_profile=15.35GiB non_torch_memory=0.35GiB "
             "kv_cache_size=2.89GiB gpu_memory_utilization=0.90",
             "doctor-vllm-v0-llama-3.1-8b-rtx3090-issue-10517.log"),
    LineForm("v0_row", "_VL_V0_ROW", "V0 0.6.5 development builds (a table: one 'key   value' row per line)",
             "INFO 12-13 19:54:18 worker.py:243] available_kv_cache_memory    53.29GiB",
             _F + "vllm-v0-meta-llama-3-8b-h100-vllm-pr-10511.log"),
    LineForm("v0_budget", "_VL_V0_BUDGET", "V0 0.6.5 - 0.8",
             "the current vLLM instance can use total_gpu_memory (79.19GiB) x gpu_memory_utilization (0.90) = 71.27GiB",
             _F + "vllm-v0-llama-2-7b-lora-h100-gateway-api-pr-550.log"),
    LineForm("v0_terms", "_VL_V0_TERMS", "V0 0.6.5 - 0.8",
             "model weights take 12.55GiB; non_torch_memory takes 0.16GiB; PyTorch activation peak memory takes "
             "2.38GiB; the rest of the memory reserved for KV Cache is 56.18GiB.",
             _F + "vllm-v0-llama-2-7b-lora-h100-gateway-api-pr-550.log"),
    LineForm("v0_blocks", "_VL_V0_BLOCKS", "V0 0.4 - 0.7 ('# GPU blocks')",
             "# GPU blocks: 1478, # CPU blocks: 2048", "doctor-vllm-v0-llama-3.1-8b-rtx3090-issue-10517.log"),
    LineForm("v0_blocks", "_VL_V0_BLOCKS", "V0 0.8 ('# cuda blocks'; '# rocm blocks' on ROCm)",
             "# cuda blocks: 7191, # CPU blocks: 512", _F + "vllm-v0-llama-2-7b-lora-h100-gateway-api-pr-550.log"),
    LineForm("v0_maxlen_error", "_VL_V0_MAXLEN", "V0 0.2 - 0.8 (a failed start)",
             "The model's max seq len (29000) is larger than the maximum number of tokens that can be stored in KV "
             "cache (23648).", "doctor-vllm-v0-llama-3.1-8b-rtx3090-issue-10517.log"),
    LineForm("hybrid_block", "_VL_HYBRID_BLOCK", "V1 0.10 - 0.33, linear-attention hybrids",
             "INFO 03-30 07:05:40 [config.py:228] Setting attention block size to 528 tokens to ensure that attention "
             "page size is >= mamba page size.",
             "doctor-vllm-hybrid-page-alignment-qwen3.5-xpu-vllm-pr-37467.log"),
    LineForm("mamba_padding", "_VL_MAMBA_PADDING", "V1 0.10 - 0.33, linear-attention hybrids",
             "Padding mamba page size by 0.76% to ensure that mamba page size and attention page size are exactly "
             "equal.",
             "doctor-vllm-hybrid-page-alignment-qwen3.5-xpu-vllm-pr-37467.log"),
    LineForm("profiling_override", "_VL_OVERRIDE", "V1 0.1x - 0.33 (profiling run: not the pool)",
             "Overriding num_gpu_blocks=0 with num_gpu_blocks_override=512",
             _F + "vllm-qwen3-8b-h100-llmd-planner-tp1-profiling-override.log"),
    LineForm("available", "_VL_AVAILABLE", "V1 0.8 - 0.33", "Available KV cache memory: 57.5 GiB",
             _F + "vllm-qwen3-8b-h100-llmd-planner-tp1-profiling-override.log"),
    LineForm("kv_size", "_VL_KV_SIZE", "V1 0.8 - 0.33", "GPU KV cache size: 418,688 tokens",
             _F + "vllm-qwen3-8b-h100-llmd-planner-tp1-profiling-override.log"),
    LineForm("concurrency", "_VL_CONCURRENCY", "V0 0.6.4 - V1 0.33",
             "Maximum concurrency for 8,192 tokens per request: 51.11x",
             _F + "vllm-qwen3-8b-h100-llmd-planner-tp1-profiling-override.log"),
    LineForm("maxlen_error", "_VL_MAXLEN_ERROR", "V1 0.8 - 0.33 (a failed start)",
             "To serve at least one request with the models's max seq len (221000), (10.12 GiB KV cache is needed, "
             "which is larger than the available KV cache memory (5.59 GiB). Based on the available memory, the "
             "estimated maximum model length is 122080.",
             "doctor-vllm-max-seq-len-kvfp8-issue-25350.log"),
    LineForm("error", "VL_FAILED", "V1 (a worker or the engine core died during start-up)",
             "(VllmWorker PP0_TP0 pid=4797) ERROR 09-29 05:54:49 [multiproc_executor.py:596] WorkerProc hit an "
             "exception.", "doctor-vllm-repeated-pool-pair-worker-exception-gfx906-vllm-gfx906-44.log"),
    LineForm("error", "VL_LONG_LEN", "V0 / V1 (a length above the derived one, refused: no env var)",
             "Value error, User-specified max_model_len (131072) is greater than the derived max_model_len "
             "(max_position_embeddings=32768.0 or model_max_length=None in model's config.json). To allow overriding "
             "this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1.",
             "doctor-vllm-maxlen-above-derived-refused-longvt-9.log"),
    LineForm("long_context", "VL_LONG_LEN", "V1 after vllm#20904 (VLLM_ALLOW_LONG_MAX_MODEL_LEN=1: a warning)",
             "User-specified max_model_len (131072) is greater than the derived max_model_len "
             "(max_position_embeddings=40960 or model_max_length=None in model's config.json). "
             "VLLM_ALLOW_LONG_MAX_MODEL_LEN must be used with extreme caution.",
             "format: vllm/config/model.py _get_and_verify_max_len (figures of timothystewart6/vllm-gb10#7)"),
    LineForm("long_context", "LONG_ENV", "any (the env var in a pasted command or environment)",
             "export VLLM_ALLOW_LONG_MAX_MODEL_LEN=1", "format: vllm/envs.py VLLM_ALLOW_LONG_MAX_MODEL_LEN"),
)  # fmt: skip
