"""A cache kind's cost on one GPU (kvplan/models/costs.py ``KindCost``), pinned where the mutation check moved the
defaults a token kind leaves: its ``window`` and ``request_max_bytes`` are 0 ("grows with the context, no
bound"), and ``kvplan budget --format json`` carries them raw beside a window kind's real bound.

gpt-oss-120b (tests/data/hf/gpt-oss-120b/config.json: 36 layers alternating ``sliding_attention`` with a 128-token
window and ``full_attention``, 8 kv heads × head_dim 64) on the glm-5.3-8xh200-sglang preset with fp8 KV: at
attention tp 8 a rank holds 8 // 8 = 1 kv head (SGLang ``ModelConfig.get_num_kv_heads``), so a token's K + V in
one layer is 2 × 64 × 1 B = 128 B and the 18 layers of each kind 18 × 128 = 2,304 B.
"""

from __future__ import annotations

import json

from typer.testing import CliRunner

from kvplan.cli import app

RUNNER = CliRunner(env={"KVPLAN_FORMAT": None})
SETS = ["--set", "kv_cache_dtype=fp8_e4m3", "--set", "page_size=64"]


def test_budget_json_token_kind_has_no_window_and_no_bound() -> None:
    r = RUNNER.invoke(app, ["budget", "--model", "gpt-oss-120b", *SETS, "--ctx", "128K", "--format", "json"])
    assert r.exit_code in (0, 1), r.output
    kinds = {k["kind"]: k for k in json.loads(r.stdout)["kinds"]}
    full, sw = kinds["GQA"], kinds["sliding window 128 + sinks"]
    # full attention grows with the context: no window, no most-a-request-holds (0 = unbounded)
    assert (full["per"], full["bytes_per_token"], full["window"], full["request_max_bytes"]) == ("token", 2_304, 0, 0)
    # the window kind is bounded: 128 tokens × 2,304 B = 294,912 B a request
    assert (sw["per"], sw["window"], sw["request_max_bytes"]) == ("window", 128, 294_912)
