"""Request traces, read as streams: one request at a time, never the whole trace in Python objects.

Formats (``--trace-format``, detected when not given):

- ``mooncake``: Mooncake FAST'25 JSON Lines, ``{"timestamp": ms, "input_length": n, "output_length": n,
  "hash_ids": [..]}``. ``hash_ids`` are prefix-chained ids of 512-token blocks (a line may carry its own
  ``block_size``, as kvcache-simulator's minimal format does); the last block is partial when the input is not a
  multiple of the block (ceil listing). ``timestamp`` is optional in order mode.
- ``kvtester``: kv-cache-tester JSON, one conversation per file (a file or a directory of ``*.json``). Ids are
  64-token blocks local to each file, so every file gets its own id namespace; only full blocks are listed (floor
  listing). Sub-agent entries nest their own ``requests`` whose ``t`` counts from the sub-agent's ``t``; they are
  flattened into the parent conversation (same namespace) and ordered by absolute ``t``. Files are replayed one
  after another in name order; in occupancy mode each conversation starts when the previous one's last request
  arrived.
- ``azure``: Azure LLM inference trace CSV (``TIMESTAMP,ContextTokens,GeneratedTokens``): arrivals and lengths
  only, no block ids, so no request can reuse another's KV.
- ``kvplan``: kvplan's own JSON Lines for users' traces. The first line is a header, then one request a line::

      {"kvplan_trace": 1, "block_size": 64, "chained": true}
      {"arrival_s": 0.0, "input_tokens": 4096, "output_tokens": 256, "blocks": [17, 18, 19, 20]}

  ``blocks`` are ids (integers or strings) of the request's ``block_size``-token blocks in order: the
  full blocks (floor listing) or also the partial last one (ceil listing). With ``"chained": true`` an id names
  the block *and everything before it* (Mooncake's convention); with ``"chained": false`` ids name block
  contents only and kvplan chains them itself (a block is reused only after the same prefix).
  ``arrival_s`` (seconds, optional, default: the previous request's) and ``output_tokens`` (default 0) are
  optional. Blank lines are skipped.

A malformed line stops the read with ``FILE:LINE: what is wrong`` (exit 2); with ``skip_bad`` it is skipped and
counted instead, in every format: a line that is not UTF-8, longer than ``limits.MAX_LINE_CHARS`` bytes, not JSON,
nested deeper than ``limits.MAX_DEPTH``, an integer of more than ``limits.MAX_INT_DIGITS`` digits, a time that is
not finite or past ``limits.MAX_TRACE_SECONDS``, a length past ``limits.MAX_REQUEST_TOKENS``; a kv-cache-tester
file that cannot be read or decoded counts as one bad record. What no flag skips (exit 2): a path that is not a
regular file (a FIFO, a device), a damaged or truncated ``.gz`` (named with the line it reached), a trace past
``limits.TRACE`` bytes (decompressed). Lines are read with a bounded ``readline``, never whole.
"""

from __future__ import annotations

import json
import math
import re
from array import array
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

import msgspec

from kvplan import limits
from kvplan.errors import InputError
from kvplan.sim.lines import GZIP_ERRORS, decode_mooncake, open_trace_file, raw_lines
from kvplan.sim.lines import Line as _Line
from kvplan.sim.lines import counts as _counts
from kvplan.sim.lines import decoded as _decoded
from kvplan.sim.lines import text_lines as _lines
from kvplan.units import cdiv

FORMATS = ("mooncake", "kvtester", "azure", "kvplan")
MOONCAKE_BLOCK_TOKENS = 512
KVTESTER_BLOCK_TOKENS = 64
_ID_LIMIT = 1 << 40
"""kv-cache-tester ids are namespaced per file as ``file << 40 | id``."""


class Request:
    """One request of a trace: lengths, arrival and prefix-chained block ids (None: no reuse information)."""

    __slots__ = ("arrival_us", "blocks", "file", "index", "input_tokens", "line", "output_tokens")

    def __init__(
        self,
        index: int,
        arrival_us: int,
        input_tokens: int,
        output_tokens: int,
        blocks: list[int] | None,
        line: int,
        file: int = 0,
    ) -> None:
        self.index = index
        self.arrival_us = arrival_us
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens
        self.blocks = blocks
        self.line = line
        self.file = file

    def __repr__(self) -> str:
        n = "none" if self.blocks is None else len(self.blocks)
        return (
            f"Request(#{self.index}, t={self.arrival_us}us, in={self.input_tokens}, out={self.output_tokens}, "
            f"blocks={n})"
        )


@dataclass
class ReadStats:
    """What a read skipped (with ``skip_bad``) and how many requests it gave."""

    requests: int = 0
    bad: int = 0
    first_bad: list[str] = field(default_factory=list)

    def skip(self, message: str) -> None:
        self.bad += 1
        if len(self.first_bad) < 5:
            self.first_bad.append(message)


class _Bad(Exception):
    """A malformed record; the reader adds where it is."""


@dataclass(frozen=True)
class Trace:
    """A trace on disk and how to read it. ``read()`` may be called any number of times (each re-reads)."""

    path: Path
    format: str
    block_tokens: int
    """Tokens per trace block (0: the trace has no blocks)."""
    files: tuple[Path, ...]
    skip_bad: bool = False

    @property
    def has_blocks(self) -> bool:
        return self.format != "azure"

    @property
    def name(self) -> str:
        return self.path.name

    def where(self, r: Request) -> str:
        if self.format == "kvtester":
            return f"{self.files[r.file].name}: request {r.line}"
        return f"{self.path}:{r.line}"

    def describe(self) -> str:
        return {
            "mooncake": f"Mooncake JSONL, {self.block_tokens}-token prefix-chained blocks (last block partial)",
            "kvtester": f"kv-cache-tester JSON ({len(self.files)} conversation file(s)), "
            f"{self.block_tokens}-token blocks local to each file, full blocks only",
            "azure": "Azure CSV: arrivals and lengths only, no block ids (no reuse possible)",
            "kvplan": f"kvplan JSONL, {self.block_tokens}-token blocks",
        }[self.format]

    def read(self, stats: ReadStats | None = None) -> Iterator[Request]:
        """The requests in trace order, numbered from 0."""
        st = stats if stats is not None else ReadStats()
        reader = {
            "mooncake": _read_mooncake,
            "kvtester": _read_kvtester,
            "azure": _read_azure,
            "kvplan": _read_kvplan,
        }[self.format]
        for r in reader(self, st):
            st.requests += 1
            yield r

    def count(self) -> int:
        """Requests in the trace, in one streaming pass.

        Line formats without ``skip_bad`` count non-blank lines (a malformed one stops the replay anyway);
        otherwise every record is parsed and checked as ``read`` does."""
        if self.format in ("mooncake", "kvplan", "azure") and not self.skip_bad:
            n = sum(1 for line in raw_lines(self.path) if _counts(line))
            return n - (self.format != "mooncake")  # the kvplan header, the CSV header
        n = 0
        for _ in self.read():
            n += 1
        return n


# --------------------------------------------------------------------------- opening, lines and JSON


_open = open_trace_file
_GZIP_ERRORS = GZIP_ERRORS


_LONG_INT = re.compile(rf"[0-9]{{{limits.MAX_INT_DIGITS + 1}}}")  # [0-9]: twice as fast as \d


def _parse_int(text: str) -> int:
    if len(text.lstrip("-")) > limits.MAX_INT_DIGITS:
        raise _Bad(f"an integer of {len(text.lstrip('-')):,} digits is past kvplan's limit of {limits.MAX_INT_DIGITS}")
    return int(text)


def _no_constant(name: str) -> Any:
    raise _Bad(f"{name} is not a number kvplan accepts (JSON has no {name})")


_DECODER = json.JSONDecoder(parse_constant=_no_constant)
"""Built once: json.loads with any hook builds a decoder per call."""
_LONG_INT_DECODER = json.JSONDecoder(parse_int=_parse_int, parse_constant=_no_constant)


def _json(text: str) -> Any:
    """json.loads for untrusted text: bounded depth and integer length, no NaN or Infinity; _Bad otherwise."""
    if limits.too_deep(text):
        raise _Bad(f"JSON nested deeper than kvplan's limit of {limits.MAX_DEPTH}")
    try:
        if _LONG_INT.search(text):
            return _LONG_INT_DECODER.decode(text)
        return _DECODER.decode(text)
    except json.JSONDecodeError as e:
        raise _Bad(f"not JSON ({e.msg})") from None
    except RecursionError:
        raise _Bad(f"JSON nested deeper than kvplan's limit of {limits.MAX_DEPTH}") from None


def _first_line(path: Path) -> _Line:
    with closing(_lines(path)) as lines:
        for line in lines:
            if line.problem:
                raise InputError(f"trace {path}:{line.number}: {line.problem}")
            if line.text.strip():
                return line
    raise InputError(f"trace {path}: empty file")


def detect_format(path: Path) -> str:
    """The format of a trace file or directory, from its name and its first line."""
    if path.is_dir():
        return "kvtester"
    name = path.name.removesuffix(".gz")
    if name.endswith(".csv"):
        return "azure"
    if name.endswith(".json"):
        return "kvtester"
    line = _first_line(path)
    if line.text.startswith("TIMESTAMP,"):
        return "azure"
    try:
        first = _json(line.text)
    except _Bad as e:
        raise InputError(
            f"trace {path}:{line.number}: cannot tell the format ({e}): use --trace-format {'|'.join(FORMATS)}"
        ) from None
    if isinstance(first, dict):
        if "kvplan_trace" in first:
            return "kvplan"
        if "input_length" in first and isinstance(first.get("hash_ids"), list):
            return "mooncake"
        if isinstance(first.get("hash_ids"), dict):
            raise InputError(
                f"trace {path}: categorized hash_ids (RAGPulse) are not prefix-chained; convert the trace to "
                "kvplan JSONL with the chain you mean (see kvplan simulate --help)"
            )
    raise InputError(f"trace {path}: cannot tell the format from line 1: use --trace-format {'|'.join(FORMATS)}")


def open_trace(
    path: str | Path, fmt: str | None = None, *, skip_bad: bool = False, block_tokens: int | None = None
) -> Trace:
    """A ``Trace`` for a path; ``fmt`` overrides detection, ``block_tokens`` the format's block size."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"trace {p}: no such file or directory")
    if not p.is_dir():
        limits.check_regular(p, "trace")
    if fmt is not None and fmt not in FORMATS:
        raise InputError(f"--trace-format {fmt!r}: use one of {', '.join(FORMATS)}")
    if block_tokens is not None:
        limits.bounded_int(block_tokens, name="--block-size", low=1, high=limits.MAX_REQUEST_TOKENS)
    kind = fmt or detect_format(p)
    files: tuple[Path, ...] = (p,)
    if kind == "kvtester" and p.is_dir():
        files = tuple(sorted(x for x in p.iterdir() if x.name.endswith((".json", ".json.gz")) and x.is_file()))
        if not files:
            raise InputError(f"trace {p}: a kv-cache-tester directory needs *.json files; found none")
    elif p.is_dir():
        raise InputError(f"trace {p}: is a directory; only kv-cache-tester traces are read from directories")
    if kind == "mooncake":
        bt = block_tokens or MOONCAKE_BLOCK_TOKENS
    elif kind == "kvtester":
        bt = block_tokens or _kvtester_block(files, skip_bad)
    elif kind == "kvplan":
        header = _kvplan_header(p)
        bt = block_tokens or header["block_size"]
    else:
        bt = 0
    return Trace(p, kind, bt, files, skip_bad)


# --------------------------------------------------------------------------- field checks


def _int(rec: dict[str, Any], key: str, *, default: int | None = None) -> int:
    """A token count: a non-negative integer up to ``limits.MAX_REQUEST_TOKENS``."""
    v = rec.get(key)
    if v is None:
        if default is not None:
            return default
        raise _Bad(f"missing {key!r}")
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise _Bad(f"{key!r} must be a non-negative integer, got {_show(v)}")
    if v > limits.MAX_REQUEST_TOKENS:
        raise _Bad(
            f"{key!r} is {v:,} tokens, past kvplan's limit of {limits.MAX_REQUEST_TOKENS:,} tokens a request"
            " (limits.MAX_REQUEST_TOKENS)"
        )
    return v


def _show(v: object) -> str:
    text = repr(v)
    return text if len(text) <= 60 else text[:40] + "…"


def _block_size(v: object) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not 0 < v <= limits.MAX_REQUEST_TOKENS:
        raise _Bad(f"'block_size' must be a positive integer up to {limits.MAX_REQUEST_TOKENS:,}, got {_show(v)}")
    return v


def _time(v: object, key: str, unit: str, per_second: int) -> int | float:
    """A non-negative, finite time in ``unit`` (``per_second`` of them a second), up to
    ``limits.MAX_TRACE_SECONDS``."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise _Bad(f"{key!r} must be a non-negative number of {unit}, got {_show(v)}")
    if not math.isfinite(v):
        raise _Bad(f"{key!r} is {v!r}, not a finite number of {unit}")
    if v < 0 or v > limits.MAX_TRACE_SECONDS * per_second:
        raise _Bad(f"{key!r} must be between 0 and {limits.MAX_TRACE_SECONDS * per_second:,} {unit}, got {_show(v)}")
    return v


def _check_listing(n_blocks: int, input_tokens: int, block_tokens: int) -> None:
    lo = input_tokens // block_tokens
    hi = cdiv(input_tokens, block_tokens)
    if not lo <= n_blocks <= hi:
        want = f"{lo}" if lo == hi else f"{lo} (full blocks) or {hi} (with the partial one)"
        raise _Bad(
            f"{n_blocks} block ids for {input_tokens} input tokens in {block_tokens}-token blocks: expected {want}"
        )


def _int_ids(v: object, key: str) -> list[int]:
    if not isinstance(v, list):
        raise _Bad(f"{key!r} must be a list of block ids")
    for x in v:
        if isinstance(x, bool) or not isinstance(x, int) or x < 0:
            raise _Bad(f"{key!r} holds {_show(x)}: ids must be non-negative integers")
    _check_distinct(v)
    return v


def _check_distinct(ids: list[Any]) -> None:
    if len(set(ids)) != len(ids):
        raise _Bad("a block id repeats within the request, which prefix-chained ids cannot do")


def _fail_or_skip(trace: Trace, stats: ReadStats, where: str, why: str) -> None:
    message = f"{where}: {why}"
    if not trace.skip_bad:
        raise InputError(f"{message} (--skip-bad skips and counts such lines)")
    stats.skip(message)


def _records(trace: Trace, stats: ReadStats, skip_first: bool = False) -> Iterator[tuple[int, Any]]:
    """(line number, parsed JSON) of every non-blank line; bad lines fail or are skipped and counted."""
    first = skip_first
    for line in _lines(trace.path):
        if not line.problem and not line.text.strip():
            continue
        if first:
            first = False
            continue
        try:
            if line.problem:
                raise _Bad(line.problem)
            rec = _json(line.text)
            if not isinstance(rec, dict):
                raise _Bad("not a JSON object")
        except _Bad as e:
            _fail_or_skip(trace, stats, f"{trace.path}:{line.number}", str(e))
            continue
        yield line.number, rec


# --------------------------------------------------------------------------- Mooncake


def _read_mooncake(trace: Trace, stats: ReadStats) -> Iterator[Request]:
    """Each line through msgspec's typed decoder when it can be sure (``lines.decode_mooncake``), else through
    ``_mooncake_checked``: the same requests and the same errors either way, the first many times faster."""
    bt0 = trace.block_tokens
    max_tokens = limits.MAX_REQUEST_TOKENS
    max_ms = limits.MAX_TRACE_SECONDS * 1000
    index = 0
    last_arrival = 0
    for line in raw_lines(trace.path):
        rec = None if line.problem else decode_mooncake(line.raw)
        if rec is not None:
            length, ids, ts, out = rec.input_length, rec.hash_ids, rec.timestamp, rec.output_length
            n = len(ids)
            if (
                0 <= length <= max_tokens
                and (out is None or 0 <= out <= max_tokens)
                and (ts is None or 0 <= ts <= max_ms)
                and (rec.block_size is msgspec.UNSET or rec.block_size == bt0)
                and length // bt0 <= n <= -(-length // bt0)
                and len(set(ids)) == n
            ):
                arrival = last_arrival if ts is None else round(ts * 1000)
                last_arrival = arrival
                yield Request(index, arrival, length, out or 0, ids, line.number)
                index += 1
                continue
        got = _mooncake_checked(trace, stats, _decoded(line), last_arrival)
        if got is not None:
            last_arrival = got.arrival_us
            got.index = index
            yield got
            index += 1


def _mooncake_checked(trace: Trace, stats: ReadStats, line: _Line, last_arrival: int) -> Request | None:
    """One Mooncake line through ``json`` and kvplan's checks in Python: the request, or None for a blank line or
    one skipped (``skip_bad``); InputError for a bad line otherwise."""
    if not line.problem and not line.text.strip():
        return None
    where = f"{trace.path}:{line.number}"
    try:
        if line.problem:
            raise _Bad(line.problem)
        rec = _json(line.text)
        if not isinstance(rec, dict):
            raise _Bad("not a JSON object")
        length = _int(rec, "input_length")
        ids = _int_ids(rec.get("hash_ids"), "hash_ids")
        bt = _block_size(rec.get("block_size", trace.block_tokens))
        if bt != trace.block_tokens:
            raise _Bad(f"block_size {bt} differs from the trace's {trace.block_tokens} (use --block-size {bt})")
        _check_listing(len(ids), length, bt)
        ts = rec.get("timestamp")
        arrival = last_arrival if ts is None else round(_time(ts, "timestamp", "milliseconds", 1000) * 1000)
        out = _int(rec, "output_length", default=0)
    except _Bad as e:
        _fail_or_skip(trace, stats, where, str(e))
        return None
    return Request(0, arrival, length, out, ids, line.number)


# --------------------------------------------------------------------------- kv-cache-tester


def _load_json_file(path: Path) -> Any:
    """One kv-cache-tester document, read whole under ``limits.TRACE_JSON`` (decompressed for .json.gz).

    Everything wrong with the file's content is a _Bad (skippable); a path that is not a regular file is not."""
    cap = limits.TRACE_JSON.effective()
    try:
        with _open(path) as f:
            data = f.read(cap + 1)
    except _GZIP_ERRORS as e:
        raise _Bad(f"the gzip stream is damaged or cut short ({e or type(e).__name__})") from None
    except OSError as e:
        raise _Bad(f"cannot read: {e.strerror or e}") from None
    if len(data) > cap:
        raise _Bad(
            f"over kvplan's {limits.TRACE_JSON.kind} limit of {cap:,} bytes (set {limits.TRACE_JSON.env} to raise it)"
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise _Bad(f"line {line}: not valid UTF-8 (byte 0x{data[e.start]:02x})") from None
    try:
        return _json(text)
    except _Bad as e:
        try:
            json.loads(text)
        except json.JSONDecodeError as err:
            raise _Bad(f"line {err.lineno}: not JSON ({err.msg})") from None
        except (ValueError, RecursionError):
            pass
        raise e from None


def _kvtester_block(files: tuple[Path, ...], skip_bad: bool) -> int:
    """The block size of the first file (with ``skip_bad``: of the first readable one)."""
    for path in files:
        try:
            doc = _load_json_file(path)
            return _block_size(doc.get("block_size", KVTESTER_BLOCK_TOKENS) if isinstance(doc, dict) else None)
        except _Bad as e:
            if not skip_bad:
                raise InputError(f"{path}: {e} (--skip-bad skips and counts such files)") from None
    return KVTESTER_BLOCK_TOKENS


def _kvtester_entries(doc: Any) -> list[tuple[int, str, dict[str, Any]]]:
    """(absolute arrival in us, where, record) of every LLM request, sub-agents flattened."""
    if not isinstance(doc, dict) or not isinstance(doc.get("requests"), list):
        raise _Bad("not a kv-cache-tester conversation (no 'requests' list)")
    out: list[tuple[int, str, dict[str, Any]]] = []
    for i, entry in enumerate(doc["requests"]):
        where = f"requests[{i}]"
        if not isinstance(entry, dict):
            out.append((0, where, {"_bad": "not a JSON object"}))
            continue
        try:
            t = _time(entry.get("t", 0), "t", "seconds", 1)
        except _Bad as e:
            out.append((0, where, {"_bad": str(e)}))
            continue
        if entry.get("type") == "subagent":
            subs = entry.get("requests")
            if not isinstance(subs, list):
                out.append((0, where, {"_bad": "sub-agent entry without a 'requests' list"}))
                continue
            for j, sub in enumerate(subs):
                sub_where = f"{where}.requests[{j}]"
                if not isinstance(sub, dict):
                    out.append((0, sub_where, {"_bad": "not a JSON object"}))
                    continue
                try:
                    st = _time(sub.get("t", 0), "t", "seconds", 1)
                except _Bad as e:
                    out.append((0, sub_where, {"_bad": str(e)}))
                    continue
                out.append((round((t + st) * 1_000_000), sub_where, sub))
        else:
            out.append((round(t * 1_000_000), where, entry))
    out.sort(key=lambda e: e[0])
    return out


def _read_kvtester(trace: Trace, stats: ReadStats) -> Iterator[Request]:
    bt = trace.block_tokens
    index = 0
    offset = 0
    for file_no, path in enumerate(trace.files):
        try:
            doc = _load_json_file(path)
            fbt = doc.get("block_size", bt) if isinstance(doc, dict) else bt
            if fbt != bt:
                raise _Bad(f"block_size {_show(fbt)} differs from the trace's {bt}")
            entries = _kvtester_entries(doc)
        except _Bad as e:
            _fail_or_skip(trace, stats, str(path), str(e))
            continue
        namespace = file_no * _ID_LIMIT
        last = 0
        for n, (t_us, where, rec) in enumerate(entries, 1):
            try:
                if "_bad" in rec:
                    raise _Bad(rec["_bad"])
                length = _int(rec, "in")
                out = _int(rec, "out", default=0)
                ids = _int_ids(rec.get("hash_ids"), "hash_ids")
                _check_listing(len(ids), length, bt)
                if any(x >= _ID_LIMIT for x in ids):
                    raise _Bad(f"hash ids must be below 2**40 (one namespace per file), got {_show(max(ids))}")
            except _Bad as e:
                _fail_or_skip(trace, stats, f"{path.name}: {where}", str(e))
                continue
            last = max(last, t_us)
            blocks = [namespace + x for x in ids] if namespace else ids
            yield Request(index, offset + t_us, length, out, blocks, n, file_no)
            index += 1
        offset += last


# --------------------------------------------------------------------------- Azure

_AZURE_TIME = re.compile(r"\s*(\d{4})-(\d{1,2})-(\d{1,2})[ T](\d{1,2}):(\d{1,2}):(\d{1,2})(?:\.(\d{1,12}))?\s*")
_AZURE_HEADER = ["TIMESTAMP", "ContextTokens", "GeneratedTokens"]


def _azure_time_us(text: str) -> int:
    """'2023-11-16 18:17:03.9799600' -> microseconds since 0001-01-01 (fraction truncated to microseconds)."""
    m = _AZURE_TIME.fullmatch(text)
    if m is None:
        raise ValueError(text)
    y, mo, d, hh, mm, ss = (int(x) for x in m.groups()[:6])
    if hh > 23 or mm > 59 or ss > 60:
        raise ValueError(text)
    micros = int(((m.group(7) or "") + "000000")[:6])
    seconds = date(y, mo, d).toordinal() * 86_400 + hh * 3600 + mm * 60 + ss
    return seconds * 1_000_000 + micros


def _azure_fields(text: str) -> list[str]:
    """A line of the Azure CSV (no quoting there; a field in double quotes loses them)."""
    return [f.strip().strip('"').strip() for f in text.rstrip("\r\n").split(",")]


def _azure_count(text: str, key: str) -> int:
    try:
        v = limits.int_text(text, name=key)
    except InputError as e:
        raise _Bad(str(e)) from None
    return _int({key: v}, key)


def _read_azure(trace: Trace, stats: ReadStats) -> Iterator[Request]:
    index = 0
    start: int | None = None
    header_seen = False
    columns = len(_AZURE_HEADER)
    for line in _lines(trace.path):
        if not line.problem and not line.text.strip():
            continue
        if not header_seen:
            header_seen = True
            if line.problem or _azure_fields(line.text)[:3] != _AZURE_HEADER:
                raise InputError(f"{trace.path}:{line.number}: expected the header {','.join(_AZURE_HEADER)}")
            columns = len(_azure_fields(line.text))
            continue
        try:
            if line.problem:
                raise _Bad(line.problem)
            row = _azure_fields(line.text)
            if len(row) != columns:  # a CSV row has the header's columns, no more
                raise _Bad(f"expected {columns} columns as the header has, got {len(row)}")
            try:
                t = _azure_time_us(row[0])
            except (ValueError, OverflowError):
                raise _Bad(f"TIMESTAMP {_show(row[0])} is not 'YYYY-MM-DD HH:MM:SS.fraction'") from None
            length = _azure_count(row[1], "ContextTokens")
            out = _azure_count(row[2], "GeneratedTokens")
        except _Bad as e:
            _fail_or_skip(trace, stats, f"{trace.path}:{line.number}", str(e))
            continue
        if start is None:
            start = t
        yield Request(index, t - start, length, out, None, line.number)
        index += 1
    if not header_seen:
        raise InputError(f"{trace.path}:1: expected the header {','.join(_AZURE_HEADER)}")


# --------------------------------------------------------------------------- kvplan JSONL


def _kvplan_header(path: Path) -> dict[str, Any]:
    line = _first_line(path)
    try:
        head = _json(line.text)
    except _Bad:
        head = None
    where = f"{path}:{line.number}"
    if not isinstance(head, dict) or head.get("kvplan_trace") != 1:
        raise InputError(f'{where}: a kvplan trace starts with a header like {{"kvplan_trace": 1, "block_size": 64}}')
    try:
        _block_size(head.get("block_size"))
    except _Bad as e:
        raise InputError(f"{where}: {e}") from None
    if not isinstance(head.get("chained", True), bool):
        raise InputError(f"{where}: 'chained' must be true or false")
    return head


def _read_kvplan(trace: Trace, stats: ReadStats) -> Iterator[Request]:
    bt = trace.block_tokens
    chained = bool(_kvplan_header(trace.path).get("chained", True))
    names: dict[object, int] = {}
    index = 0
    last_arrival = 0
    for lineno, rec in _records(trace, stats, skip_first=True):
        try:
            length = _int(rec, "input_tokens")
            out = _int(rec, "output_tokens", default=0)
            raw = rec.get("blocks")
            if not isinstance(raw, list):
                raise _Bad("'blocks' must be a list of block ids")
            for x in raw:
                if isinstance(x, bool) or not isinstance(x, int | str):
                    raise _Bad(f"'blocks' holds {_show(x)}: ids are integers or strings")
            _check_listing(len(raw), length, bt)
            if chained:
                _check_distinct(raw)
            ts = rec.get("arrival_s")
            arrival = last_arrival if ts is None else round(_time(ts, "arrival_s", "seconds", 1) * 1_000_000)
        except _Bad as e:
            _fail_or_skip(trace, stats, f"{trace.path}:{lineno}", str(e))
            continue
        blocks: list[int] = []
        parent: object = None
        for x in raw:
            name: object = (parent, x) if not chained else x
            key = names.get(name)
            if key is None:
                key = names[name] = len(names)
            blocks.append(key)
            parent = key
        last_arrival = arrival
        yield Request(index, arrival, length, out, blocks, lineno)
        index += 1


# --------------------------------------------------------------------------- one parse, shared


_BIG_ID = 1 << 63


class CompactTrace:
    """A trace parsed once into flat integer arrays (8 bytes a field and a block id, no object per request), to
    replay as many times as needed: a per-capacity sweep reads the file once and its worker processes, forked
    after, share the arrays' pages instead of each parsing the file again."""

    def __init__(self, trace: Trace) -> None:
        stats = ReadStats()
        self.arrival = array("q")
        self.input = array("q")
        self.output = array("q")
        self.line = array("q")
        self.file = array("q")
        self.ids = array("q")
        """Block ids below 2**63 as they are; the larger ones (the readers allow up to ``limits.MAX_INT_DIGITS``
        digits) stored as ``-1 - n`` (n: order of first sight) and read back as ``2**63 + n``: one to one, and
        every id in 8 bytes."""
        self.starts = array("q", [0])
        big: dict[int, int] = {}
        """Request i's blocks are ``ids[starts[i]:starts[i + 1]]``."""
        self.has_blocks = trace.has_blocks
        for r in trace.read(stats):
            self.arrival.append(r.arrival_us)
            self.input.append(r.input_tokens)
            self.output.append(r.output_tokens)
            self.line.append(r.line)
            self.file.append(r.file)
            if r.blocks is not None:
                at = len(self.ids)
                try:
                    self.ids.extend(r.blocks)
                except OverflowError:  # an id past 2**64 - 1: extend stopped part way
                    del self.ids[at:]
                    self.ids.extend(b if b < _BIG_ID else -1 - big.setdefault(b, len(big)) for b in r.blocks)
            self.starts.append(len(self.ids))
        self.bad = stats.bad
        self.renamed = bool(big)

    def __len__(self) -> int:
        return len(self.input)

    def read(self) -> Iterator[Request]:
        """The requests in trace order, as ``Trace.read`` gives them."""
        ids, st, blocks, renamed = self.ids, self.starts, self.has_blocks, self.renamed
        for i in range(len(self.input)):
            got = ids[st[i] : st[i + 1]].tolist() if blocks else None
            if renamed and got:
                got = [b if b >= 0 else _BIG_ID - 1 - b for b in got]
            yield Request(i, self.arrival[i], self.input[i], self.output[i], got, self.line[i], self.file[i])
