"""`simulate --deploy`: requests over the deployment's context length are rejected, counted, never replayed
(issue 23, item 6).

The engines' rules (kvplan/sim/context.py):
- SGLang 0.5.23 ``TokenizerManager._validate_one_request``: rejected when ``input >= context_len`` or
  ``input + max_new_tokens >= context_len`` (the replay sends the trace's output length as max_new_tokens); then
  the scheduler's ``validate_input_length``: ``input >= min(context_len - 1, pool - 1) - 5``, and max_new_tokens
  cut to ``context_len - 1 - input - 1``;
- vLLM 0.33.0 ``InputProcessor._validate_prompt_len``: rejected when ``prompt_len >= max_model_len`` (equal is
  refused for a generate runner: one output token is needed); ``get_max_tokens`` (entrypoints/utils.py) caps the
  output at ``max_model_len - prompt_len``.

The four-request trace below (512-token Mooncake blocks), on qwen3-32b with a 4,096-token context:
  r0 1,024 in + 100 out, blocks 1-2      SGLang 1,124 < 4,096 runs; vLLM runs
  r1 4,096 in + 10 out, blocks 1-8       both reject (input = the context)
  r2 3,584 in + 600 out, blocks 1-7      SGLang 4,184 >= 4,096 rejects; vLLM runs (3,584 < 4,096), output cut to 512
  r3 2,048 in + 10 out, blocks 1-4       both run
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.lengths import ContextLimit
from kvplan.sim.context import admitted
from kvplan.sim.result import Refused
from kvplan.sim.trace import Request

runner = CliRunner(env={"KVPLAN_FORMAT": None})

TRACE = [
    (1024, 100, [1, 2]),
    (4096, 10, [1, 2, 3, 4, 5, 6, 7, 8]),
    (3584, 600, [1, 2, 3, 4, 5, 6, 7]),
    (2048, 10, [1, 2, 3, 4]),
]


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    p = tmp_path / "trace.jsonl"
    p.write_text(
        "".join(
            json.dumps({"timestamp": 10 * i, "input_length": n, "output_length": o, "hash_ids": ids}) + "\n"
            for i, (n, o, ids) in enumerate(TRACE)
        )
    )
    (tmp_path / "s.yaml").write_text("model: qwen3-32b\ncontext_length: 4096\n")
    (tmp_path / "v.yaml").write_text("model: qwen3-32b\nengine: vllm\nmax_model_len: 4096\n")
    return p


def sim(*args: str | Path) -> dict[str, Any]:
    r = runner.invoke(app, ["simulate", *map(str, args), "--format", "json"])
    assert r.exit_code == 0, r.stdout + r.stderr
    data: dict[str, Any] = json.loads(r.stdout)
    return data


def test_sglang_rejects_input_plus_output_at_the_context(trace: Path) -> None:
    d = sim(trace, "--deploy", trace.parent / "s.yaml")
    # r1 and r2 rejected: 2 of 4 (500,000 ppm), their inputs 4,096 + 3,584 = 7,680 tokens
    assert d["rejected_context"] == {
        "context_tokens": 4096, "requests": 2, "of_requests": 4, "share_ppm": 500_000, "input_tokens": 7680,
    }  # fmt: skip
    # replayed r0 (no hit) and r3 (blocks 1-2 cached by r0: 1,024 tokens on 1-token pages) over 1,024 + 2,048
    # (before the fix r1 and r2 ran too, and r2 hit 3,584 tokens that r1 had cached)
    assert (d["hit"]["tokens"], d["hit"]["measured_tokens"], d["hit"]["measured_requests"]) == (1024, 3072, 2)
    assert d["hit_length_tokens"]["max"] == 1024
    r = runner.invoke(app, ["simulate", str(trace), "--deploy", str(trace.parent / "s.yaml")])
    assert "2 request(s) (50.0%) rejected over the context length of 4,096" in " ".join(r.stdout.split())
    assert "rejected: context length" in r.stdout


def test_vllm_rejects_the_prompt_only(trace: Path) -> None:
    d = sim(trace, "--deploy", trace.parent / "v.yaml")
    assert d["rejected_context"] == {
        "context_tokens": 4096, "requests": 1, "of_requests": 4, "share_ppm": 250_000, "input_tokens": 4096,
    }  # fmt: skip
    # 16-token blocks (vLLM's default block size). r2 hits blocks 1-2 (1,024 tokens); r3 finds its 4 blocks
    # cached by r2 but a hit stops one token short of the prompt (kv_cache_manager.get_computed_blocks:
    # max_cache_hit_length = prompt - 1): (2,048 - 1) // 16 × 16 = 2,032. Total 3,056 of 1,024 + 3,584 + 2,048.
    assert d["unit_tokens"] == 16
    assert (d["hit"]["tokens"], d["hit"]["measured_tokens"], d["hit"]["measured_requests"]) == (3056, 6656, 3)


def test_curves_count_the_rejected_too(trace: Path) -> None:
    for extra in (["--semantics", "ideal"], []):  # the one-pass ideal curve, and one replay per capacity
        d = sim(trace, "--deploy", trace.parent / "s.yaml", "--sweep", "1e3..1e5", "--points", "3", *extra)
        assert d["rejected_context"]["requests"] == 2 and d["measured_tokens"] == 3072


def test_without_a_deployment_nothing_is_bounded(trace: Path) -> None:
    d = sim(trace, "--semantics", "sglang", "--capacity", "1M")
    assert d["rejected_context"] is None and d["hit"]["measured_requests"] == 4


def test_the_rules_at_the_boundary() -> None:
    sg, vl = ContextLimit("sglang", 4096), ContextLimit("vllm", 4096)
    # SGLang: max_req_input_len = (4,096 - 1) - 5 = 4,090; 4,089 + 6 = 4,095 < 4,096 passes the tokenizer
    assert not sg.refuses(4089, 6) and sg.refuses(4089, 7) and sg.refuses(4090, 0) and sg.refuses(4096, 0)
    assert sg.output_tokens(4089, 6) == 5 and sg.output_tokens(100, 1000) == 1000  # max_req_len 4,095 - 4,089 - 1
    assert not vl.refuses(4095, 1000) and vl.refuses(4096, 0)
    assert vl.output_tokens(4095, 1000) == 1
    refused = Refused()
    reqs = [Request(i, 0, n, o, None, i + 1) for i, (n, o, _) in enumerate(TRACE)]
    kept = list(admitted(reqs, vl, refused))
    # trace positions kept (the window counts them); r2's 600 output tokens cut to 4,096 - 3,584 = 512
    assert [(r.index, r.output_tokens) for r in kept] == [(0, 100), (2, 512), (3, 10)]
    assert (refused.requests, refused.input_tokens) == (1, 4096)


def test_mooncake_conversation_on_qwen3_32b(traces: Path) -> None:
    # Qwen3-32B runs 40,960 positions (config.json max_position_embeddings; SGLang's context_len by default). The
    # requests SGLang rejects, counted straight from the trace: input_length + output_length >= 40,960, or
    # input_length >= 40,960 - 6 (the scheduler's max_req_input_len).
    path = traces / "mooncake" / "conversation_trace.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    over = [r for r in rows if r["input_length"] + r["output_length"] >= 40_960 or r["input_length"] >= 40_954]
    d = sim(path, "--model", "qwen3-32b", "--semantics", "ideal")
    rc = d["rejected_context"]
    assert (rc["requests"], rc["of_requests"], rc["input_tokens"]) == (
        len(over), len(rows), sum(r["input_length"] for r in over),
    )  # fmt: skip
    assert d["hit_length_tokens"]["max"] < 40_960  # no hit longer than the context the engine runs
