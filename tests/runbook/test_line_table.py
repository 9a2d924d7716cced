"""One table drives the log parser (issue 27 step 5): each ``LineForm`` row carries its compiled pattern, the fact
it builds and its example, and ``events._events`` reads a record with the rows alone. Every row's example matches
its own pattern and builds its own fact; every pattern the parser reads lines with is a row; the facts of the rows
added for the lines that were read outside the table are pinned from their example's own text."""

from __future__ import annotations

import pytest

from kvplan.runbook.long_context import LongContext
from kvplan.runbook.parse import SGLANG_LINES, VLLM_LINES, Gib, LineForm, Override, parse_log, records
from kvplan.runbook.parse import events as parse_events
from tests.runbook.conftest import parse_patterns

ROWS = [("sglang", r) for r in SGLANG_LINES] + [("vllm", r) for r in VLLM_LINES]


def _id(item: tuple[str, LineForm]) -> str:
    engine, row = item
    return f"{engine}-{row.kind}-{row.versions.split(' ')[0]}"


@pytest.mark.parametrize("item", ROWS, ids=[_id(i) for i in ROWS])
def test_each_row_builds_its_fact_from_its_example(item: tuple[str, LineForm]) -> None:
    engine, row = item
    m = row.pattern.search(row.example)
    assert m is not None
    facts = row.fact(m, row.example)
    assert row.kind in [kind for kind, _ in facts]
    # and the parser, which reads with the rows alone, yields the same fact for it
    recs = records._records([row.example], records._LineCount())
    events = [(e.kind, e.engine, e.value) for rec in recs for e in parse_events._events(rec)]
    assert all((kind, engine, value) in events for kind, value in facts)


def test_every_line_pattern_is_a_row() -> None:
    # only the patterns that read inside a matched line (or split a log into records) are not rows of their own;
    # before the table drove the parser, 'Memory baseline taken', 'Setting kv cache block size', 'Using … KV cache
    # format', 'Overriding num_gpu_blocks' (the pool's), the dcp multiplier, 'Using max model len', 'Resolved
    # architecture' and 'No available memory for the cache blocks' were read outside it
    helpers = {"_ANSI", "_START", "_CONTAINER", "_ARG_INT", "_ARG_NUMBER", "_DICT_ITEM", "_LOAD_AVAIL", "_LOAD_USAGE",
               "_LOAD_TYPE", "_LOAD_DTYPE", "_LOAD_QUANT", "_VL_V0_FIELD", "_VL_V0_DEVICE",
               "_MESSAGE_START"}  # fmt: skip
    in_rows = {r.pattern for _, r in ROWS}
    assert {name for name, p in parse_patterns().items() if p not in in_rows} <= helpers


def test_rows_that_share_a_pattern_share_its_reader() -> None:
    # a pattern is read once a match: two readers on one pattern would make every line two events
    readers: dict[tuple[str, int], object] = {}
    for engine, row in ROWS:
        assert readers.setdefault((engine, id(row.pattern)), row.fact) is row.fact, (engine, row.kind)


def _fact(item: tuple[str, LineForm]) -> list[tuple[str, object]]:
    _, row = item
    m = row.pattern.search(row.example)
    assert m is not None
    return list(row.fact(m, row.example))


def _row(kind: str, pattern_name: str) -> tuple[str, LineForm]:
    pattern = parse_patterns()[pattern_name]
    return next(i for i in ROWS if i[1].kind == kind and i[1].pattern is pattern)


@pytest.mark.parametrize(
    ("kind", "pattern", "expected"),
    [
        # SGLang srt/distributed/bootstrap.py: 'Memory baseline taken. mem usage={:.2f} GB' -> 1.25 (GiB, /(1<<30))
        ("baseline", "_SG_BASELINE", Gib.parse("1.25")),
        # vLLM config/model.py: 'Resolved architecture: %s' -> the class name
        ("architecture", "_VL_ARCH", "LlamaForCausalLM"),
        # vLLM config/model.py: 'Using max model len %s' -> 4096 (the field log's --max-model-len 4096)
        ("max_len", "_VL_MAX_LEN", 4096),
        # vLLM platforms/interface.py:777: 'Setting kv cache block size to %d for %s backend(s).' -> 64
        ("block", "_VL_BLOCK", 64),
        # vLLM mla_attention.py:531: 'Using %s KV cache format for %s backend.' -> fp8_ds_mla
        ("format", "_VL_FORMAT", "fp8_ds_mla"),
        # vLLM kv_cache_utils.py: 'Multiplying the GPU KV cache size by the dcp_world_size %d.' -> 8
        ("dcp", "_VL_DCP", 8),
        # vLLM kv_cache_planning.py may_override_num_blocks: profiled 7191 blocks, the override 512 is the pool
        ("override", "_VL_OVERRIDE", Override(7191, 512)),
    ],
)
def test_rows_read_outside_the_table_before_build_their_facts(kind: str, pattern: str, expected: object) -> None:
    assert _fact(_row(kind, pattern)) == [(kind, expected)]


def test_no_memory_row_is_a_failed_start() -> None:
    # vllm-project/vllm-ascend#5707 (verbatim): vLLM raises ValueError('No available memory for the cache blocks.
    # …') when the budget leaves nothing: the start failed
    ((kind, value),) = _fact(_row("error", "_VL_NO_MEMORY"))
    assert kind == "error" and value == "No available memory for the cache blocks"
    run = parse_log(_row("error", "_VL_NO_MEMORY")[1].example).chosen
    assert run.complete and run.errors[0].value == "No available memory for the cache blocks"


def test_each_engine_reads_its_own_long_context_variable() -> None:
    # the env var of SGLang (model_config.py) and of vLLM (envs.py): each engine's row yields its own engine's fact
    text = "export SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1"
    (rec,) = records._records([text], records._LineCount())
    got = [(e.kind, e.engine, e.value) for e in parse_events._events(rec)]
    assert got == [("long_context", "sglang", LongContext("sglang", f"on: {text[7:]}", None))]
