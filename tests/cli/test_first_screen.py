"""The first screen answers (issue 29 item 3): at 80 columns, the first 15 lines of admit carry the verdict in
tokens, the pool in tokens, the binding check with its pages, the smallest fix and the engine's own summary line.

The figures: the default deployment's pool is 567,616 tokens = 8,869 pages × 64 (SGLang 0.5.23
model_runner: available_bytes // cell 53,940 // 64 × 64; README "What `kvplan admit --ctx 1M` says"); a 1M request
is 1,048,576 tokens = 16,384 pages of 64; SGLang logs that pool as max_total_num_tokens=567616 (scheduler.py
prints ints unformatted). --set dcp=2 re-plans to 1,278,208 tokens (README's remedy row).
"""

from __future__ import annotations

from typer.testing import CliRunner

from kvplan.cli import app

runner = CliRunner(env={"KVPLAN_FORMAT": None, "COLUMNS": "80"})


def _head(*args: str) -> tuple[int, str]:
    r = runner.invoke(app, list(args))
    return r.exit_code, "\n".join(r.stdout.splitlines()[:15])


def test_admit_1m_rejected_first_screen() -> None:
    code, head = _head("admit", "--ctx", "1M")
    assert code == 1
    lines = head.splitlines()
    assert lines[1] == "REJECTED: 1,048,576 tokens needed, the pool holds 567,616"  # tokens first, no pages
    assert "pool pages: needs 16,384 pages, has 8,869" in head  # the page rounding second
    assert "smallest fix   --set dcp=2 (the pool then holds 1,278,208 tokens)" in head
    assert "SGLang 0.5.23 would log:" in head and "max_total_num_tokens=567616, chunked_prefill_size=8192," in head


def test_admit_128k_admitted_first_screen() -> None:
    code, head = _head("admit", "--ctx", "128K")
    assert code == 0
    assert head.splitlines()[1].startswith("ADMITTED: 1 × 131,072-token request(s) fit; the pool holds 567,616 tokens")
    assert "max_total_num_tokens=567616" in head


def test_admit_vllm_first_screen_has_the_vllm_lines() -> None:
    # the vLLM preset (0.33.0): one info_once line, 'GPU KV cache size: N tokens, Maximum concurrency for L tokens
    # per request: X.XXx' (kvplan.engines.log_summary); max_model_len 524,288 is the preset's context_length
    code, head = _head("admit", "--ctx", "128K", "-d", "glm-5.3-8xh200-vllm")
    assert code == 0
    assert "vLLM 0.33.0 would log:" in head
    assert "GPU KV cache size: " in head and "Maximum concurrency for 524,288 tokens per" in head


def test_admit_json_carries_the_engine_lines_as_raw_ints() -> None:
    import json

    r = CliRunner(env={"KVPLAN_FORMAT": None}).invoke(app, ["admit", "--ctx", "1M", "--format", "json"])
    log = json.loads(r.stdout)["plan"]["engine_log"]
    assert log["figures"]["max_total_num_tokens"] == 567_616
    assert log["lines"][0].startswith("max_total_num_tokens=567616,")
