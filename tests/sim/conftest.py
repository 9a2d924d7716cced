"""Shared fixtures for the simulator tests: the real traces in ../shared/traces, and small traces made here."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

TRACES = Path(__file__).resolve().parents[3] / "shared" / "traces"


@pytest.fixture(scope="session")
def traces() -> Path:
    """shared/traces beside the repository; the tests that read it skip cleanly when it is absent."""
    if not (TRACES / "mooncake" / "conversation_trace.jsonl").is_file():
        pytest.skip(f"real traces not found at {TRACES}")
    return TRACES


MakeTrace = Callable[..., Path]


@pytest.fixture
def mooncake_file(tmp_path: Path) -> MakeTrace:
    """Write Mooncake JSONL from (timestamp ms, input, output, ids) rows or raw lines; returns its path."""

    def make(rows: list[Any], name: str = "t.jsonl") -> Path:
        lines = []
        for row in rows:
            if isinstance(row, str):
                lines.append(row)
            else:
                ts, length, out, ids = row
                lines.append(json.dumps({"timestamp": ts, "input_length": length, "output_length": out,
                                         "hash_ids": ids}))  # fmt: skip
        p = tmp_path / name
        p.write_text("\n".join(lines) + "\n")
        return p

    return make
