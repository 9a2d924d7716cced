"""The safetensors index read with bounded work (issue 25 item 6).

Before: a snapshot whose model.safetensors.index.json lists 1M tensors took 29 s and 922 MB (the issue's
machine; 4.4 s and 346 MB for `kvplan budget` here with 12-character names). Now an index over
MAX_INDEX_TENSORS (500,000) is refused before it is parsed (0.75 s, 94 MB for the whole process here: the read
of its 33 MB), and one at the limit is read in 2.3 s and 190 MB (JSON objects built in C, not a Python loop).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan import limits
from kvplan.cli import app
from kvplan.errors import ConfigError, InputError
from kvplan.models import index_bounds, safetensors
from kvplan.models.index_bounds import MAX_INDEX_TENSORS
from kvplan.models.safetensors import read_index

DATA = Path(__file__).parents[1] / "data"
LLAMA = DATA / "hf" / "llama-3.1-8b" / "config.json"


def _index(path: Path, n: int, shard: str = "m.safetensors") -> Path:
    entries = ",".join(f'"l.{i % 32}.w{i}":"{shard}"' for i in range(n))
    path.write_text('{"metadata":{"total_size":16060522496},"weight_map":{' + entries + "}}")
    return path


def test_a_million_tensors_are_refused_before_the_parse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _index(tmp_path / "model.safetensors.index.json", 1_000_000)

    def never(*_: object) -> object:
        raise AssertionError("the index was parsed")

    monkeypatch.setattr(safetensors, "_strict_json", never)
    with pytest.raises(ConfigError, match=r"weight_map: lists 1,000,000 tensors, over kvplan's limit of 500,000"):
        read_index(path)


def test_shards_not_named_safetensors_are_counted_after_the_parse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(index_bounds, "MAX_INDEX_TENSORS", 10)
    with pytest.raises(ConfigError, match="lists 11 tensors, over kvplan's limit of 10"):
        read_index(_index(tmp_path / "i.json", 11, shard="m.bin"))
    assert len(read_index(_index(tmp_path / "j.json", 10, shard="m.bin")).names) == 10


def test_the_limit_is_over_the_largest_real_index() -> None:
    # an INT4 Kimi-K2 (compressed-tensors): 61 layers × 384 experts × 3 projections × 3 tensors (weight_packed,
    # weight_scale, weight_shape) = 210,816 expert tensors alone; DeepSeek-V3's index lists ~91,000
    assert MAX_INDEX_TENSORS > 61 * 384 * 3 * 3


def test_a_snapshot_over_the_limit_is_exit_2_naming_the_file(tmp_path: Path) -> None:
    snap = tmp_path / "snap"
    snap.mkdir()
    (snap / "config.json").write_text(LLAMA.read_text())
    _index(snap / "model.safetensors.index.json", MAX_INDEX_TENSORS + 1)
    r = CliRunner().invoke(app, ["budget", "--model", str(snap)])
    assert r.exit_code == 2, r.output
    assert r.stderr.startswith(f"kvplan: error: {snap / 'model.safetensors.index.json'}: weight_map: lists 500,001")
    assert len(r.stderr.splitlines()) == 1


def test_duplicate_keys_are_still_refused_by_the_c_level_pairs() -> None:
    with pytest.raises(InputError, match="duplicate key 'b'"):
        limits.strict_json('{"a": 1, "b": 2, "c": {"x": 1}, "b": 3}')
    assert limits.strict_json('{"a": {"a": 1}, "b": [{"a": 2}]}') == {"a": {"a": 1}, "b": [{"a": 2}]}
