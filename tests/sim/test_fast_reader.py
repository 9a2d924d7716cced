"""The Mooncake reader's fast path (msgspec's typed decoder, kvplan/sim/lines.py) against its checked path (json and
kvplan's checks in Python, ``trace.formats._mooncake_checked``, kept as the reference): the same requests, the same
errors and the same skipped-line messages, on the real traces and on lines made to sit on every check's edge.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvplan import limits
from kvplan.errors import InputError
from kvplan.sim import trace as tr
from kvplan.sim.lines import decode_mooncake, raw_lines
from kvplan.sim.trace import formats


def _checked_only(trace: tr.Trace, stats: tr.ReadStats) -> Iterator[tr.Request]:
    """The reference: every line through the checked path."""
    index = 0
    last = 0
    for line in formats._lines(trace.path):
        got = formats._mooncake_checked(trace, stats, line, last)
        if got is not None:
            last = got.arrival_us
            got.index = index
            index += 1
            yield got


def _outcome(path: Path, *, skip_bad: bool, fast: bool) -> tuple[Any, ...]:
    trace = tr.open_trace(path, "mooncake", skip_bad=skip_bad)
    stats = tr.ReadStats()
    rows: list[tuple[Any, ...]] = []
    try:
        it = trace.read(stats) if fast else _checked_only(trace, stats)
        for r in it:
            assert r.blocks is not None
            assert all(type(x) is int for x in r.blocks)
            assert type(r.arrival_us) is int and type(r.output_tokens) is int
            rows.append((r.index, r.arrival_us, r.input_tokens, r.output_tokens, tuple(r.blocks), r.line))
    except InputError as e:
        return ("error", str(e), tuple(rows))
    return ("ok", tuple(rows), stats.bad, tuple(stats.first_bad))


def test_real_traces_agree_and_take_the_fast_path(traces: Path) -> None:
    # Both Mooncake traces in shared/traces: every line is one msgspec accepts (the speed depends on it), and the
    # requests are the checked path's, field for field.
    for name in ("conversation_trace.jsonl", "synthetic_trace.jsonl"):
        path = traces / "mooncake" / name
        assert all(decode_mooncake(line.raw) is not None for line in raw_lines(path) if line.raw.strip())
        assert _outcome(path, skip_bad=False, fast=True) == _outcome(path, skip_bad=False, fast=False)


_GOOD = {"timestamp": 27, "input_length": 1100, "output_length": 5, "hash_ids": [0, 1, 2]}
_VALUES = st.one_of(
    st.integers(-3, 3),
    st.sampled_from([0, 512, 1024, 1536, limits.MAX_REQUEST_TOKENS, limits.MAX_REQUEST_TOKENS + 1]),
    st.sampled_from([(1 << 63) - 1, 1 << 63, 10**29, 10**30, -(1 << 63), 2**64]),
    st.sampled_from([limits.MAX_TRACE_SECONDS * 1000, limits.MAX_TRACE_SECONDS * 1000 + 1, 1e300, -0.0, 0.5]),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=3),
    st.lists(st.integers(0, 5), max_size=4),
)
_RAW = st.sampled_from(
    [
        '{"input_length": 1, "hash_ids": [7]}',
        '\ufeff{"input_length": 1, "hash_ids": [7]}',
        '{"input_length": 1, "hash_ids": [7], "hash_ids": [7, 8]}',
        '{"input_length": 1, "hash_ids": [7], "x": ' + "[" * 70 + "]" * 70 + "}",
        '{"input_length": 1, "hash_ids": [7], "x": ' + "9" * 31 + "}",
        '{"input_length": 1, "hash_ids": [' + "9" * 31 + "]}",
        '{"input_length": 1, "hash_ids": [' + "9" * 30 + "]}",
        '{"input_length": 1, "hash_ids": [7], "timestamp": 1e400}',
        '{"input_length": 1, "hash_ids": [7], "timestamp": NaN}',
        '{"input_length": 1, "hash_ids": [7], "note": "caf\u00e9"}',
        '{"input_length": 1, "hash_ids": [7], "note": "a\tb"}',
        '{"input_length": 1.0, "hash_ids": [7]}',
        '{"input_length": 1, "hash_ids": [7.0]}',
        '{"input_length": 1, "hash_ids": [7]} x',
        '[{"input_length": 1, "hash_ids": [7]}]',
        "   ",
        "\x1c",
        "",
    ]
)


@st.composite
def _line(draw: st.DrawFn) -> str:
    if draw(st.booleans()):
        return draw(_RAW)
    rec = dict(_GOOD)
    for _ in range(draw(st.integers(0, 2))):
        key = draw(st.sampled_from([*_GOOD, "block_size", "extra"]))
        if draw(st.integers(0, 4)) == 0:
            rec.pop(key, None)
        else:
            rec[key] = draw(_VALUES)
    return json.dumps(rec)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(_line(), min_size=1, max_size=6), skip_bad=st.booleans())
def test_fast_and_checked_paths_agree(tmp_path: Path, lines: list[str], skip_bad: bool) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(("\n".join(lines) + "\n").encode("utf-8", "surrogatepass"))
    assert _outcome(path, skip_bad=skip_bad, fast=True) == _outcome(path, skip_bad=skip_bad, fast=False)


@pytest.mark.parametrize(
    ("line", "fast"),
    [
        (b'{"timestamp": 0, "input_length": 6758, "output_length": 500, "hash_ids": [0, 1]}', True),
        (b'{"input_length": 1, "hash_ids": [7], "extra": 1}', False),  # an unknown field: the checked path
        (b'{"input_length": 1, "hash_ids": [9223372036854775808]}', False),  # past int64
        (b'{"input_length": 1, "hash_ids": [true]}', False),
        (b'{"input_length": 1, "hash_ids": [7], "block_size": null}', False),
        (b'{"input_length": 1, "hash_ids": [7], "note": "\xc3\xa9"}', False),  # not ASCII
    ],
)
def test_what_the_fast_decoder_takes(line: bytes, fast: bool) -> None:
    assert (decode_mooncake(line) is not None) is fast


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(st.one_of(_line(), st.text(st.sampled_from(" \t\x0b\x0c\x1c\x1f\x85\xa0\u3000x{"))), max_size=6))
def test_count_without_decoding_agrees(tmp_path: Path, lines: list[str]) -> None:
    # Trace.count tells blank lines on bytes; the reference decodes each line and asks str.strip, as read does
    path = tmp_path / "t.jsonl"
    path.write_bytes(("\n".join(lines) + "\n").encode("utf-8", "surrogatepass"))
    want = sum(1 for line in formats._lines(path) if line.problem or line.text.strip())
    assert tr.open_trace(path, "mooncake").count() == want


def _hits(runner_out: str) -> list[int]:
    doc = json.loads(runner_out)
    return [p["hit_tokens"] for p in doc["points"]] if "points" in doc else [doc["hit"]["tokens"]]


@pytest.mark.parametrize("semantics", ["vllm", "sglang"])
def test_ids_past_int64_replay_as_small_ones(tmp_path: Path, semantics: str) -> None:
    # The readers accept ids of up to MAX_INT_DIGITS digits; an engine sweep keeps the trace in 8-byte arrays
    # (CompactTrace), which raised OverflowError (an internal error, exit 4) on an id of 2**63 or more. Renaming
    # ids one to one changes no hit, so the same trace with small ids is the expected answer, at every capacity.
    from typer.testing import CliRunner

    from kvplan.cli import app

    big = [2**64 + 7, 2**63, 2**63 - 1, 10**29, 3]
    small = [11, 12, 13, 14, 3]
    rows = [[0, 1, 2], [0, 1, 3], [0, 4], [0, 1, 2, 3, 4]]

    def write(name: str, names: list[int]) -> Path:
        path = tmp_path / name
        lines = [
            json.dumps(
                {"timestamp": t, "input_length": 512 * len(r), "output_length": 1, "hash_ids": [names[i] for i in r]}
            )
            for t, r in enumerate(rows * 3)
        ]
        path.write_text("\n".join(lines) + "\n")
        return path

    runner = CliRunner(env={"KVPLAN_FORMAT": None})
    args = ["--semantics", semantics, "--sweep", "2K,4K,8K", "-j", "1", "--format", "json"]
    got = runner.invoke(app, ["simulate", str(write("big.jsonl", big)), *args])
    want = runner.invoke(app, ["simulate", str(write("small.jsonl", small)), *args])
    assert want.exit_code == 0, want.output
    assert got.exit_code == 0, got.output
    assert _hits(got.stdout) == _hits(want.stdout)
    assert sum(_hits(want.stdout)) > 0  # the trace reuses blocks: the comparison is not of zeros
