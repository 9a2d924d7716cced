"""Invocations whose ``--format json`` output tests/cli/test_json_schemas.py validates against the shipped schemas.

Each command is run on the shapes its report takes: both engines, the hybrids (per-layer kinds: gpt-oss, Qwen3-Next,
Kimi-Linear, DeepSeek-V4), an old SGLang and a vLLM V0, pipeline stages, a refused start, rejected and admitted
requests, and for doctor every log in tests/data/logs.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

DATA = Path(__file__).parents[1] / "data"
SG, VL = "glm-5.3-8xh200-sglang", "glm-5.3-8xh200-vllm"
HYBRIDS = ("gpt-oss-120b", "qwen3-next-80b-a3b", "kimi-linear-48b-a3b", "deepseek-v4-flash", "llama-3.1-8b")
SMALL_FIT = ("--model", "glm-5.3", "--gpu", "h200", "--engine", "sglang", "--max-gpus", "8", "--mtp", "off")


def _plans(command: str, *extra: str) -> list[list[str]]:
    out = [[command, *extra], [command, "--deploy", VL, *extra]]
    out += [[command, "--model", m, "--deploy", d, *extra] for m in HYBRIDS for d in (SG, VL)]
    out += [
        [command, "--model", "llama-3.1-8b", "--set", "engine_version=0.4.8", *extra],
        [command, "--model", "llama-3.1-8b", "--deploy", VL, "--set", "engine_version=0.8.5", *extra],
        [command, "--set", "pp=2", "--set", "nodes=2", *extra],
        [command, "--set", "dcp=2", *extra],
        [command, "--set", "mem_fraction_static=0.6", *extra],  # the engine would not start
    ]
    return out


def cases(tmp: Path) -> list[list[str]]:
    """Every invocation, with what they read copied under ``tmp`` (the caller chdirs there)."""
    for f in (DATA / "gate").iterdir():
        shutil.copy(f, tmp / f.name)
    trace = tmp / "t.jsonl"
    rows = [(0, 1024, 16, [1, 2]), (1000, 2048, 32, [1, 2, 3, 4]), (2000, 1024, 8, [5, 6])]
    trace.write_text("".join(json.dumps(dict(zip(("timestamp", "input_length", "output_length", "hash_ids"), r,
                                                     strict=True))) + "\n" for r in rows))  # fmt: skip
    out: list[list[str]] = []
    out += _plans("admit", "--ctx", "1M") + _plans("admit", "--ctx", "128K", "--concurrent", "4")
    out += [["admit", "--ctx", "4M"], ["admit", "--ctx", "1M", "--gen", "8K", "--concurrent", "2"]]
    out += [["admit", "--ctx", "128K", "--concurrent", "100"], ["admit", "--ctx", "128K", "--deploy", "base.yaml"]]
    out += [["admit", "--ctx", "128K", "--model", "llama-3.1-8b"]]
    out += _plans("budget") + _plans("workspace") + _plans("transfer", "--ctx", "128K")
    out += _plans("prefix", "--ctx", "128K", "--hit", "64K")
    out += [["prefix", "--ctx", "1M", "--sweep", "4"]]
    out += [["knobs"], ["gpus"], ["models", "list"], ["deployments", "list"]]
    out += [["models", "show", m] for m in (*HYBRIDS, "glm-5.3", "deepseek-v3")]
    out += [["deployments", "show", d] for d in (SG, VL)]
    out += [["deployments", "show", SG, "--emit-command", "vllm"], ["admit", "--ctx", "128K", "--emit-command", "auto"]]
    out += [["fit", *SMALL_FIT, "--require-ctx", "1M", "--emit-command", "sglang"]]
    out += [["lock", "base.yaml"], ["lock", "indexer39.yaml"]]
    out += [["gate", "base.yaml"], ["gate", "indexer39.yaml", "--max-capacity-drop", "2%", "--require-ctx", "1M"]]
    out += [["lock", "base.yaml", "--prune"]]
    out += [["gate", SG, "--against-version", "0.5.9", "--require-ctx", "512K"]]
    out += [["diff", "base.yaml", "indexer39.yaml"], ["diff", "base.yaml", "bf16.yaml"]]
    out += [["diff", "--engine-version", "0.5.9", "0.5.23", SG]]
    out += [["fit", *SMALL_FIT, "--require-ctx", "1M"], ["fit", *SMALL_FIT, "--require-concurrency", "4@128K"]]
    out += [["fit", *SMALL_FIT, "--require-ctx", "1M", "--pd"], ["fit", *SMALL_FIT, "--require-ctx", "4M"]]
    out += [["fit", *SMALL_FIT, "--trace", str(trace)], ["fit", *SMALL_FIT, "--trace", str(trace), "--min-hit", "0.9"]]
    sla = ("--isl", "1K", "--osl", "1K", "--concurrency", "8", "--require-ttft", "2s")
    out += [["fit", *SMALL_FIT, *sla, "--require-tpot", "60ms"], ["fit", *SMALL_FIT, *sla, "--require-tpot", "1ms"]]
    out += [["simulate", str(trace), "--trace-format", "mooncake", "--sweep", "1e4..1e6", "--points", "3"]]
    out += [["simulate", str(trace), "--trace-format", "mooncake"]]
    out += [["simulate", str(trace), "--semantics", "sglang", "--deploy", SG, "--occupancy"]]
    out += [["simulate", str(trace), "--semantics", "vllm", "--deploy", VL, "--capacity", "6000 pages"]]
    out += [
        ["simulate", str(trace), "--deploy", SG, "--sweep", "1e4..1e6", "--points", "2", "--set", "context_length=1500"]
    ]
    logs = sorted(p for p in (DATA / "logs").glob("*.log"))
    out += [["doctor", "--log", str(p)] for p in logs]
    perf = ("--isl", "8K", "--osl", "1K", "--concurrency", "16")
    out += [
        ["perf", *perf],
        ["perf", "--deploy", VL, *perf],
        ["perf", "--model", "llama-3.1-8b", "--deploy", VL, *perf],
        ["perf", "--deploy", VL, "--trace", str(DATA / "traces" / "mooncake_conversation_40.jsonl")],
        [
            "fit",
            "--model",
            "llama-3.1-8b",
            "--gpu",
            "h200",
            "--engine",
            "vllm",
            "--max-gpus",
            "2",
            "--pd",
            "--require-ttft",
            "60s",
            "--require-tpot",
            "20ms",
            "--isl",
            "32K",
            "--osl",
            "1K",
            "--concurrency",
            "16",
        ],
    ]
    out += [["doctor", "--log", str(DATA / "logs" / "sglang-0.5.23-glm53-match.log"), "--deploy", SG]]
    return [[*c, "--format", "json"] for c in out]
