"""Limits on untrusted input, as one policy (README "Limits and untrusted input").

Every file and value kvplan reads may come from a pull request or a log pasted from anywhere, so each
reader goes through here: regular files only (no FIFOs or devices), a size cap per kind of file, a line
length cap for streamed files, a nesting depth, and integers bounded by what a GPU or an engine could
ever hold. Past a limit the reader raises :class:`LimitError` (exit 2) naming the limit, and how to
raise it where raising makes sense (``KVPLAN_MAX_<KIND>_BYTES``).
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from pathlib import Path
from typing import IO

from kvplan import fsio, record
from kvplan.errors import InputError

MiB_ = 1 << 20


class LimitError(InputError):
    """Input past one of kvplan's limits on untrusted input."""


@record
class FileLimit:
    kind: str
    max_bytes: int
    env: str

    def effective(self) -> int:
        """The limit, raised or lowered by the environment variable: a positive whole number of bytes with an
        optional unit (``8MiB``, ``2GB``; units as ``--set`` sizes take them). Anything else is a LimitError
        naming the variable, never the default in silence; an empty variable is unset."""
        raw = os.environ.get(self.env, "").strip()
        if not raw:
            return self.max_bytes
        m = _ENV_BYTES.match(raw)
        scale = _ENV_UNITS.get(m.group(2).lower()) if m else None
        value = int(m.group(1)) * scale if m and scale else 0
        if value < 1 or value > MAX_ENV_BYTES:
            raise LimitError(
                f"{self.env}={raw[:40]!r}: expected a positive whole number of bytes with an optional unit, e.g."
                f" {self.max_bytes} or {self.max_bytes // MiB_}MiB (at most {MAX_ENV_BYTES >> 40:,} TiB)"
            )
        return value


_ENV_BYTES = re.compile(r"^([0-9]{1,16})\s*([KMGT]i?B|B|)$", re.IGNORECASE)
_ENV_UNITS = {"": 1, "b": 1, **{f"{p}b": 1000 ** (i + 1) for i, p in enumerate("kmgt")},
              **{f"{p}ib": 1 << 10 * (i + 1) for i, p in enumerate("kmgt")}}  # fmt: skip
MAX_ENV_BYTES = 1 << 50
"""1 PiB: the largest value a KVPLAN_MAX_*_BYTES variable may set."""


CONFIG = FileLimit("config", 4 * MiB_, "KVPLAN_MAX_CONFIG_BYTES")
"""A model or deployment YAML, a config.json, a lock file: a real one is a few KB."""
LOG = FileLimit("log", 1 << 30, "KVPLAN_MAX_LOG_BYTES")
"""An engine log is streamed line by line; only the whole-file size is capped."""
TRACE = FileLimit("trace", 64 << 30, "KVPLAN_MAX_TRACE_BYTES")
"""Traces are streamed; the decompressed size of a .gz counts."""
TRACE_JSON = FileLimit("trace-json", 512 * MiB_, "KVPLAN_MAX_TRACE_JSON_BYTES")
"""A kv-cache-tester JSON document is read whole."""
CHECKPOINT_INDEX = FileLimit("checkpoint-index", 64 * MiB_, "KVPLAN_MAX_CHECKPOINT_INDEX_BYTES")
"""model.safetensors.index.json: DeepSeek-V3's lists ~91,000 tensors in ~9 MB."""

FILE_LIMITS = (CONFIG, LOG, TRACE, TRACE_JSON, CHECKPOINT_INDEX)


def check_environment() -> None:
    """Every KVPLAN_MAX_*_BYTES variable read at start-up, so a bad one is refused whatever the command reads."""
    for limit in FILE_LIMITS:
        limit.effective()


MAX_LINE_CHARS = 1 << 20
"""Longest line of a streamed file (trace, log) kvplan reads; longer lines are cut (logs) or bad (traces)."""
MAX_DEPTH = 64
"""Deepest nesting of a YAML or JSON document."""
MAX_YAML_ALIASES = 100
"""YAML aliases expanded per document; real configs use none."""
MAX_YAML_NODES = 100_000
"""Values in one YAML or JSON config once aliases are expanded; a real config.json has a few hundred."""
MAX_SAFETENSORS_HEADER_BYTES = 100 * MiB_
"""Largest JSON header of one .safetensors file kvplan reads (a 91,000-tensor shard's is ~10 MB)."""
MAX_INT_DIGITS = 30
"""Longest integer literal kvplan parses (2**64 has 20 digits); longer is refused before int()."""

MAX_GPU_BYTES = 1 << 50
"""1 PiB: no single GPU holds more; any per-GPU byte figure above is refused."""
MIN_GPU_BYTES = 1 << 30
"""1 GiB: the smallest GPU memory (NVML or CUDA total) a custom GPU may declare."""
MIN_MEMORY_KNOB_BYTES = 1 << 20
"""1 MiB: weights_per_gpu, pre_load_free, runtime_overhead, kv_cache_memory below this are a unit slip."""
MIN_WEIGHTS_PPM = 10_000
"""weights_per_gpu under 1 % (10,000 ppm) of the model's own estimate is refused as a unit slip."""
MAX_TOKENS = 1 << 40
"""About 10^12 tokens: beyond any context length or pool an engine could build."""
MAX_LAYERS = 100_000
MAX_DIM = 1 << 24
"""Largest hidden size, head dim, vocab size or head count kvplan accepts in a model config."""
MAX_MODULE_PATTERNS = 4096
"""Most module names or patterns in a quantization_config's lists (ignore, exclude_modules, targets)."""
MAX_MODULE_REGEXES = 64
"""Most ``re:`` patterns among them (each is tried against every module name kvplan sizes)."""
MAX_PATTERN_LAYERS = 1024
"""Most layers (+ MTP layers) whose module names kvplan matches against a quantization_config's module lists; a
config that quantizes every linear module alike is sized for any layer count up to MAX_LAYERS."""
MAX_MODULE_PATTERN_CHARS = 512
"""Longest module name or ``re:`` pattern kvplan matches (regexes run against short module names only)."""
MAX_MODULE_PATTERN_REPEATS = 4
"""Most repeats (``*``, ``+``, ``{m,n}``) in one ``re:`` module pattern; a repeated group is refused outright."""
MAX_CONFIG_MODULES = 100_000
"""Most linear modules kvplan lays out one by one from a config.json (Kimi-K2: ~71,000); past it, a config's
weights are its parameter groups (the same estimate without the per-tensor names), in bounded time."""
MAX_GPUS = 1 << 20
"""Largest GPU count (tp, dp, ep, nodes × gpus_per_node) kvplan plans."""
MAX_FIT_GPUS = 1024
"""Largest --max-gpus `kvplan fit` searches (its candidates grow with the divisors of every tp up to it)."""
MAX_LOOP = 10_000
"""Largest number of points a sweep or plot computes."""
MAX_REQUEST_TOKENS = 1 << 24
"""16,777,216: the longest request (input or output tokens) a trace may hold; past any model's context."""
MAX_TRACE_SECONDS = 1 << 40
"""Latest arrival time in a trace (about 35,000 years), so that microseconds stay below 2**63."""
MAX_SIM_PAGES = 1 << 22
"""4,194,304: the largest pool the simulator builds page by page (vLLM's block pool), about 0.5 GB."""


def bounded_int(value: int, *, name: str, low: int, high: int) -> int:
    """value if low <= value <= high, else a LimitError naming the field and the bounds."""
    if value < low or value > high:
        if value > high:
            raise LimitError(f"{name}: {_short(value)} is above the largest value kvplan accepts ({high:,})")
        raise LimitError(f"{name}: {_short(value)} is below {low:,}")
    return value


def finite(value: float, *, name: str) -> float:
    if not math.isfinite(value):
        raise LimitError(f"{name}: {value!r} is not a finite number")
    return value


def int_text(text: str, *, name: str) -> int:
    """int(text) for a decimal literal of at most MAX_INT_DIGITS digits (Python's own limit is 4,300)."""
    t = text.strip().replace("_", "")
    digits = t.lstrip("+-")
    if not digits.isdigit() or not digits.isascii():
        raise InputError(f"{name}: {text[:40]!r} is not an integer")
    if len(digits) > MAX_INT_DIGITS:
        raise LimitError(f"{name}: an integer of {len(digits):,} digits is past kvplan's limit of {MAX_INT_DIGITS}")
    return int(t)


def _short(value: int) -> str:
    s = str(value) if value.bit_length() < 200 else f"a {value.bit_length()}-bit integer"
    return s if len(s) <= 40 else s[:20] + "…"


def check_regular(path: Path, what: str) -> os.stat_result:
    """stat() of a regular file, or an InputError (missing, a directory, a FIFO, a device, a socket)."""
    try:
        st = path.stat()
    except FileNotFoundError:
        raise InputError(f"{what} {path}: no such file") from None
    except OSError as e:
        raise InputError(f"{what} {path}: cannot read: {e.strerror or e}") from None
    if stat.S_ISDIR(st.st_mode):
        raise InputError(f"{what} {path}: is a directory, not a file")
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"{what} {path}: not a regular file (a FIFO, device or socket); kvplan reads files only")
    fsio.note_read(path, st)  # a writer of the same command never replaces it (fsio.check_target)
    return st


def read_bytes(path: Path, limit: FileLimit, what: str | None = None) -> bytes:
    """The whole of a regular file no larger than the limit; never blocks on a FIFO or reads a device."""
    what = what or limit.kind
    st = check_regular(path, what)
    cap = limit.effective()
    if st.st_size > cap:
        raise LimitError(
            f"{what} {path}: {st.st_size:,} bytes is over kvplan's {limit.kind} limit of {cap:,} bytes"
            f" (set {limit.env} to raise it)"
        )
    try:
        with path.open("rb") as f:
            data = f.read(cap + 1)
    except OSError as e:
        raise InputError(f"{what} {path}: cannot read: {e.strerror or e}") from None
    if len(data) > cap:  # the file grew while we read it
        raise LimitError(f"{what} {path}: over kvplan's {limit.kind} limit of {cap:,} bytes (set {limit.env})")
    return data


def read_text(path: Path, limit: FileLimit, what: str | None = None) -> str:
    """read_bytes decoded as UTF-8; invalid bytes are reported with their line number."""
    data = read_bytes(path, limit, what)
    return decode_utf8(data, f"{what or limit.kind} {path}")


def decode_utf8(data: bytes, where: str, first_line: int = 1) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = first_line + data.count(b"\n", 0, e.start)
        raise InputError(f"{where}:{line}: not valid UTF-8 (byte 0x{data[e.start]:02x})") from None


def open_regular(path: Path, what: str) -> IO[bytes]:
    """A binary handle on a regular file (checked before opening, so a FIFO never blocks)."""
    check_regular(path, what)
    try:
        return path.open("rb")
    except OSError as e:
        raise InputError(f"{what} {path}: cannot open: {e.strerror or e}") from None


class JsonError(InputError):
    """A JSON text kvplan refuses: ``problem`` says why, ``line`` where (when known), ``key`` a duplicate key."""

    def __init__(self, problem: str, *, line: int | None = None, key: str | None = None) -> None:
        super().__init__(problem)
        self.problem = problem
        self.line = line
        self.key = key


class _DuplicateKey(ValueError):
    pass


def _pairs(pairs: list[tuple[str, object]]) -> dict[str, object]:
    out = dict(pairs)  # in C: a Python loop here was 1 s of a 1M-tensor checkpoint index
    if len(out) != len(pairs):  # a key twice: name the first
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return out


def _json_int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise ValueError(f"a number of {digits:,} digits is past kvplan's limit of {MAX_INT_DIGITS}")
    return int(text)


def _json_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:40]} is not a finite number")
    return value


def _json_constant(text: str) -> object:
    raise ValueError(f"{text} is not a number kvplan reads")


_JSON_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_JSON_BRACKETS = re.compile(r"[\[\]{}]")


def json_depth(text: str) -> int:
    """Deepest nesting of [ and { in a JSON text (strings skipped), counted without recursion."""
    deepest = level = 0
    for b in _JSON_BRACKETS.findall(_JSON_STRINGS.sub("", text)):
        level += 1 if b in "[{" else -1
        deepest = max(deepest, level)
    return deepest


def too_deep(text: str) -> bool:
    """Whether a JSON text nests deeper than MAX_DEPTH; a text with few brackets is answered without a scan."""
    return text.count("[") + text.count("{") > MAX_DEPTH and json_depth(text) > MAX_DEPTH


def strict_json(text: str) -> object:
    """json.loads for untrusted text: nesting up to MAX_DEPTH (checked before parsing), no duplicate keys, no
    NaN/Infinity or float overflow, no integer of more than MAX_INT_DIGITS digits. Else a JsonError."""
    if too_deep(text):
        raise JsonError(f"nested deeper than kvplan's limit of {MAX_DEPTH} levels")
    try:
        return json.loads(
            text, object_pairs_hook=_pairs, parse_int=_json_int, parse_float=_json_float, parse_constant=_json_constant
        )
    except json.JSONDecodeError as e:
        raise JsonError(f"not valid JSON: {e.msg}", line=e.lineno) from None
    except _DuplicateKey as e:
        raise JsonError(f"duplicate key {str(e)[:80]!r}", key=str(e)) from None
    except ValueError as e:
        raise JsonError(str(e)) from None
    except RecursionError:  # json_depth should have caught it; never a traceback
        raise JsonError(f"nested deeper than kvplan's limit of {MAX_DEPTH} levels") from None
