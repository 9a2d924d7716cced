"""A trace's records and the checks every reader shares: the request, what a read skipped, bounded JSON, fields."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvplan import limits
from kvplan.errors import InputError
from kvplan.sim.lines import Line as _Line
from kvplan.sim.lines import text_lines as _lines
from kvplan.units import cdiv

if TYPE_CHECKING:
    from kvplan.sim.trace.source import Trace


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


# --------------------------------------------------------------------------- JSON and the first line


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
