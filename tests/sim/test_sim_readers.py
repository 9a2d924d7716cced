"""Trace readers: the real traces' published counts, format detection, streaming, and malformed records."""

from __future__ import annotations

import csv
import gzip
import json
import tracemalloc
from pathlib import Path

import pytest

from kvplan.errors import InputError
from kvplan.sim.ideal import Window, reuse_bound
from kvplan.sim.trace import ReadStats, detect_format, open_trace

# --------------------------------------------------------------------------- the real traces


@pytest.mark.parametrize(
    ("name", "rows", "blocks", "unique", "last_ts_ms"),
    [
        # mooncake/README.md "Statistics" table and "Format" (conversation spans 0 to 3,536,999 ms)
        ("conversation", 12_031, 288_500, 182_790, 3_536_999),
        ("synthetic", 3_993, 121_877, 43_924, 1_022_025),
    ],
)
def test_mooncake_counts_match_the_readme(
    traces: Path, name: str, rows: int, blocks: int, unique: int, last_ts_ms: int
) -> None:
    tr = open_trace(traces / "mooncake" / f"{name}_trace.jsonl")
    assert tr.format == "mooncake" and tr.block_tokens == 512
    n = total = last = 0
    seen: set[int] = set()
    for r in tr.read():
        assert r.blocks is not None
        assert r.index == n
        n += 1
        total += len(r.blocks)
        seen.update(r.blocks)
        last = r.arrival_us
    assert (n, total, len(seen)) == (rows, blocks, unique)
    assert last == last_ts_ms * 1000


def test_mooncake_first_request(traces: Path) -> None:
    # the README's example line is the conversation trace's first line
    r = next(open_trace(traces / "mooncake" / "conversation_trace.jsonl").read())
    assert (r.arrival_us, r.input_tokens, r.output_tokens, r.blocks, r.line) == (0, 6758, 500, list(range(14)), 1)


def test_mooncake_reads_one_line_at_a_time(traces: Path) -> None:
    tr = open_trace(traces / "mooncake" / "conversation_trace.jsonl")
    it = tr.read()
    assert iter(it) is it  # a generator, not a list
    tracemalloc.start()
    try:
        for _ in it:
            pass
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # the whole trace as Python objects would be 288,500 ids in lists (> 10 MB); a line is at most a few KB
    assert peak < 2_000_000, peak


def test_kvtester_files_match_sample_stats(traces: Path) -> None:
    """Every sampled conversation: request count (sub-agents included), input tokens and the unbounded-cache
    prefix hit tokens, against kv-cache-tester-claude-code/sample_stats.csv (computed by whoever sampled it)."""
    folder = traces / "kv-cache-tester-claude-code"
    with (folder / "sample_stats.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 34
    for row in rows:
        tr = open_trace(folder / row["file"])
        assert tr.format == "kvtester" and tr.block_tokens == 64
        reqs = list(tr.read())
        hits = reuse_bound(reqs, block_tokens=64, window=Window("all", 0))
        got = (len(reqs), sum(r.input_tokens for r in reqs), hits.hit_tokens)
        want = (
            int(row["llm_requests_incl_subagents"]),
            int(row["input_tokens"]),
            int(row["infinite_cache_prefix_hit_tokens"]),
        )
        assert got == want, row["file"]


def test_kvtester_directory_namespaces_files(traces: Path) -> None:
    folder = traces / "kv-cache-tester-claude-code"
    tr = open_trace(folder)
    assert tr.format == "kvtester" and len(tr.files) == 34
    reqs = list(tr.read())
    assert len(reqs) == 1_633  # README: "1,633 LLM requests including sub-agent requests"
    # trace_0043 repeats trace_0002's hash ids (README): namespaced per file, they must not be shared
    by_file: dict[int, set[int]] = {}
    for r in reqs:
        assert r.blocks is not None
        by_file.setdefault(r.file, set()).update(r.blocks)
    files = [p.name for p in tr.files]
    assert not by_file[files.index("trace_0002.json")] & by_file[files.index("trace_0043.json")]
    # arrivals never go back: each conversation starts where the previous one's last request arrived
    arrivals = [r.arrival_us for r in reqs]
    assert arrivals == sorted(arrivals)


def test_kvtester_subagents_are_flattened_by_time(traces: Path) -> None:
    # trace_0004 has 184 top-level entries, 2 of them sub-agents, 215 LLM requests (sample_stats.csv)
    reqs = list(open_trace(traces / "kv-cache-tester-claude-code" / "trace_0004.json").read())
    assert len(reqs) == 215
    # the first sub-agent (requests[182], t = 440,243.409 s) starts with an 18,251-token request at its t + 0.0
    sub = [r for r in reqs if r.arrival_us == 440_243_409_000]
    assert [r.input_tokens for r in sub] == [18_251]


@pytest.mark.parametrize(
    ("name", "rows", "mean_in_x10", "max_in", "max_out"),
    [
        # azure-llm-2023/README.md: rows; ContextTokens mean / max; GeneratedTokens max
        ("code", 8_819, 20_478, 7_437, 1_899),
        ("conv", 19_366, 11_547, 14_050, 1_000),
    ],
)
def test_azure_counts_match_the_readme(
    traces: Path, name: str, rows: int, mean_in_x10: int, max_in: int, max_out: int
) -> None:
    tr = open_trace(traces / "azure-llm-2023" / f"AzureLLMInferenceTrace_{name}.csv")
    assert tr.format == "azure" and not tr.has_blocks
    reqs = list(tr.read())
    assert len(reqs) == rows
    total = sum(r.input_tokens for r in reqs)
    assert round(total * 10 / rows) == mean_in_x10
    assert max(r.input_tokens for r in reqs) == max_in
    assert max(r.output_tokens for r in reqs) == max_out
    assert reqs[0].arrival_us == 0 and all(r.blocks is None for r in reqs)
    # "The data spans about 1 hour"
    assert 3_000_000_000 < reqs[-1].arrival_us < 4_000_000_000


def test_azure_timestamp_arithmetic(tmp_path: Path) -> None:
    p = tmp_path / "a.csv"
    p.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 23:59:59.9999999,10,1\n"  # 7 fractional digits: truncated to microseconds
        "2023-11-17 00:00:01.5,20,2\n"
    )
    reqs = list(open_trace(p).read())
    # 00:00:01.500000 - 23:59:59.999999 of the previous day = 1.500001 s
    assert [r.arrival_us for r in reqs] == [0, 1_500_001]


# --------------------------------------------------------------------------- kvplan's own format


def _kvplan(tmp_path: Path, head: dict[str, object], rows: list[dict[str, object]]) -> Path:
    p = tmp_path / "mine.jsonl"
    p.write_text("\n".join(json.dumps(x) for x in [head, *rows]) + "\n")
    return p


def test_kvplan_format_chained_ids(tmp_path: Path) -> None:
    p = _kvplan(
        tmp_path,
        {"kvplan_trace": 1, "block_size": 4},
        [
            {"arrival_s": 0.5, "input_tokens": 9, "output_tokens": 3, "blocks": ["sys", "a", "b"]},
            {"input_tokens": 8, "blocks": ["sys", "a"]},
        ],
    )
    assert detect_format(p) == "kvplan"
    tr = open_trace(p)
    a, b = tr.read()
    assert (a.arrival_us, a.input_tokens, a.output_tokens) == (500_000, 9, 3)
    assert (b.arrival_us, b.output_tokens) == (500_000, 0)  # defaults: the previous arrival, no output
    assert a.blocks == [0, 1, 2] and b.blocks == [0, 1]


def test_kvplan_format_unchained_ids_are_chained_here(tmp_path: Path) -> None:
    # content ids: "x" after "sys" and "x" at the start are different prefixes
    p = _kvplan(
        tmp_path,
        {"kvplan_trace": 1, "block_size": 4, "chained": False},
        [{"input_tokens": 8, "blocks": ["sys", "x"]}, {"input_tokens": 8, "blocks": ["x", "x"]}],
    )
    a, b = open_trace(p).read()
    assert a.blocks is not None and b.blocks is not None
    assert a.blocks[1] not in b.blocks and len(set(b.blocks)) == 2


# --------------------------------------------------------------------------- detection and errors


def test_detection(tmp_path: Path, mooncake_file: object) -> None:
    p = tmp_path / "x.jsonl"
    p.write_text('{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [0]}\n')
    assert detect_format(p) == "mooncake"
    g = tmp_path / "x.jsonl.gz"
    g.write_bytes(gzip.compress(p.read_bytes()))
    assert detect_format(g) == "mooncake" and len(list(open_trace(g).read())) == 1
    c = tmp_path / "noext"
    c.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9799600,4808,10\n")
    assert detect_format(c) == "azure"
    rag = tmp_path / "rag.jsonl"
    rag.write_text('{"timestamp": "82", "input_length": 3, "hash_ids": {"sys_prompt": [1]}}\n')
    with pytest.raises(InputError, match="not prefix-chained"):
        detect_format(rag)
    junk = tmp_path / "junk.txt"
    junk.write_text("hello\n")
    with pytest.raises(InputError, match="--trace-format"):
        detect_format(junk)
    # --trace-format overrides detection: a Mooncake file read as kvplan needs the kvplan header
    with pytest.raises(InputError, match="header"):
        open_trace(p, "kvplan")


def test_bad_line_is_named_and_skip_bad_counts(tmp_path: Path) -> None:
    p = tmp_path / "t.jsonl"
    p.write_text(
        '{"timestamp": 0, "input_length": 1000, "hash_ids": [0, 1]}\n'
        "\n"
        "{not json\n"
        '{"timestamp": 5, "input_length": 1000, "hash_ids": [0, 1, 2]}\n'  # 3 ids for 1,000 tokens of 512
        '{"timestamp": 9, "input_length": 600, "hash_ids": [0, 0]}\n'  # a repeated chained id
        '{"timestamp": 9, "input_length": 600, "hash_ids": [0, 7]}\n'
    )
    with pytest.raises(InputError, match=rf"{p}:3: not JSON"):
        list(open_trace(p).read())
    stats = ReadStats()
    good = list(open_trace(p, skip_bad=True).read(stats))
    assert [r.line for r in good] == [1, 6] and [r.index for r in good] == [0, 1]
    assert stats.bad == 3 and stats.requests == 2
    assert (
        "t.jsonl:4: 3 block ids for 1000 input tokens in 512-token blocks: expected 1 (full blocks) or 2"
        in (stats.first_bad[1])
    )
    assert "repeats" in stats.first_bad[2]


def test_kvtester_bad_request_names_the_file_and_entry(tmp_path: Path) -> None:
    p = tmp_path / "trace_0001.json"
    p.write_text(json.dumps({"block_size": 64, "requests": [{"t": 0, "in": 200, "out": 1, "hash_ids": [1, 2]}]}))
    with pytest.raises(InputError, match=r"trace_0001.json: requests\[0\]: 2 block ids for 200"):
        list(open_trace(p).read())
    q = tmp_path / "broken.json"
    q.write_text('{"requests": [\n{"t": 0,,}]}')
    with pytest.raises(InputError, match="line 2: not JSON"):
        list(open_trace(q, "kvtester").read())


def test_missing_trace_is_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        open_trace(tmp_path / "nope.jsonl")
