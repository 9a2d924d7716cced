"""The four trace formats' readers (Mooncake JSONL, kv-cache-tester JSON, Azure CSV, kvplan JSONL): records to
requests, one at a time, every field checked (``records``). Formats (``--trace-format``, detected when not given)
are described at their readers: ``_read_mooncake``, ``_read_kvtester``, ``_read_azure``, ``_read_kvplan``.

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
import re
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from kvplan import limits
from kvplan.errors import InputError
from kvplan.sim.lines import GZIP_ERRORS, decode_mooncake, open_trace_file, raw_lines
from kvplan.sim.lines import Line as _Line
from kvplan.sim.lines import decoded as _decoded
from kvplan.sim.lines import text_lines as _lines
from kvplan.sim.trace.records import (
    ReadStats,
    Request,
    _Bad,
    _block_size,
    _check_distinct,
    _check_listing,
    _fail_or_skip,
    _first_line,
    _int,
    _int_ids,
    _json,
    _records,
    _show,
    _time,
)

if TYPE_CHECKING:
    from kvplan.sim.trace.source import Trace

MOONCAKE_BLOCK_TOKENS = 512
KVTESTER_BLOCK_TOKENS = 64
_ID_LIMIT = 1 << 40
"""kv-cache-tester ids are namespaced per file as ``file << 40 | id``."""

_open = open_trace_file
_GZIP_ERRORS = GZIP_ERRORS


# --------------------------------------------------------------------------- Mooncake


# ``mooncake``: Mooncake FAST'25 JSON Lines, ``{"timestamp": ms, "input_length": n, "output_length": n,
# "hash_ids": [..]}``. ``hash_ids`` are prefix-chained ids of 512-token blocks (a line may carry its own
# ``block_size``, as kvcache-simulator's minimal format does); the last block is partial when the input is not a
# multiple of the block (ceil listing). ``timestamp`` is optional in order mode.
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
        t = _kvtester_seconds(entry, where, out)
        if t is None:
            continue
        if entry.get("type") != "subagent":
            out.append((round(t * 1_000_000), where, entry))
            continue
        subs = entry.get("requests")
        if not isinstance(subs, list):
            out.append((0, where, {"_bad": "sub-agent entry without a 'requests' list"}))
            continue
        for j, sub in enumerate(subs):
            sub_where = f"{where}.requests[{j}]"
            st = _kvtester_seconds(sub, sub_where, out)
            if st is not None:
                out.append((round((t + st) * 1_000_000), sub_where, sub))
    out.sort(key=lambda e: e[0])
    return out


def _kvtester_seconds(entry: Any, where: str, out: list[tuple[int, str, dict[str, Any]]]) -> float | None:
    """An entry's ``t`` in seconds, or None once the reason it is bad is recorded in ``out`` (the request is then
    reported, not dropped)."""
    if not isinstance(entry, dict):
        out.append((0, where, {"_bad": "not a JSON object"}))
        return None
    try:
        return _time(entry.get("t", 0), "t", "seconds", 1)
    except _Bad as e:
        out.append((0, where, {"_bad": str(e)}))
        return None


# ``kvtester``: kv-cache-tester JSON, one conversation per file (a file or a directory of ``*.json``). Ids are
# 64-token blocks local to each file, so every file gets its own id namespace; only full blocks are listed (floor
# listing). Sub-agent entries nest their own ``requests`` whose ``t`` counts from the sub-agent's ``t``; they are
# flattened into the parent conversation (same namespace) and ordered by absolute ``t``. Files are replayed one
# after another in name order; in occupancy mode each conversation starts when the previous one's last request
# arrived.
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


# ``azure``: Azure LLM inference trace CSV (``TIMESTAMP,ContextTokens,GeneratedTokens``): arrivals and lengths
# only, no block ids, so no request can reuse another's KV.
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


# ``kvplan``: kvplan's own JSON Lines for users' traces. The first line is a header, then one request a line:
#     {"kvplan_trace": 1, "block_size": 64, "chained": true}
#     {"arrival_s": 0.0, "input_tokens": 4096, "output_tokens": 256, "blocks": [17, 18, 19, 20]}
# ``blocks`` are ids (integers or strings) of the request's ``block_size``-token blocks in order: the
# full blocks (floor listing) or also the partial last one (ceil listing). With ``"chained": true`` an id names
# the block *and everything before it* (Mooncake's convention); with ``"chained": false`` ids name block
# contents only and kvplan chains them itself (a block is reused only after the same prefix).
# ``arrival_s`` (seconds, optional, default: the previous request's) and ``output_tokens`` (default 0) are
# optional. Blank lines are skipped.
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
