"""kvplan's cache of what it fetched from the Hub (kvplan/models/hub_cache.py): where it lives and how the manifest
of a header-only snapshot is checked, pinned at the bounds the mutation check moves.

Where: the XDG base directory rule (KVPLAN_CACHE_DIR, else $XDG_CACHE_HOME/kvplan, else ~/.cache/kvplan) and
Hugging Face's own folder naming, ``models--ORG--NAME`` (huggingface_hub ``repo_folder_name``). A shard's cached
header is its first 8 + n bytes (the little-endian length, then the JSON header: the safetensors format).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvplan import limits
from kvplan.errors import InputError
from kvplan.models import hub_cache


def test_the_cache_folder_follows_the_environment(tmp_path: Path) -> None:
    assert hub_cache.kvplan_cache_dir({"KVPLAN_CACHE_DIR": str(tmp_path / "k")}) == tmp_path / "k"
    assert hub_cache.kvplan_cache_dir({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "kvplan"
    assert hub_cache.kvplan_cache_dir({}) == Path.home() / ".cache" / "kvplan"
    folder = hub_cache.repo_folder("org/tiny", {"XDG_CACHE_HOME": str(tmp_path)})
    assert folder == tmp_path / "kvplan" / "hub" / "models--org--tiny"


def _manifest(folder: Path, shards: object) -> Path:
    folder.mkdir(exist_ok=True)
    (folder / hub_cache.HEADERS_NAME).write_text(json.dumps({"repo": "org/tiny", "revision": "main", "shards": shards}))
    (folder / hub_cache.HEADERS_DIR).mkdir(exist_ok=True)
    return folder


def _header(folder: Path, name: str, n: int, extra: int = 0) -> bytes:
    body = n.to_bytes(8, "little") + b" " * n + b"\0" * extra
    (folder / hub_cache.HEADERS_DIR / name).write_bytes(body)
    return body


@pytest.mark.parametrize("count", [0, 10_001])
def test_a_manifest_of_no_shards_or_over_10000_is_refused(tmp_path: Path, count: int) -> None:
    folder = _manifest(tmp_path / "snap", [{"file": "m.safetensors", "size": 16}] * count)
    with pytest.raises(InputError, match=r"shards: expected 1 to 10,000 entries; remove .* and fetch again"):
        hub_cache.cached_headers(folder)


def test_10000_shards_pass_the_count_and_one_shard_is_read(tmp_path: Path) -> None:
    # 10,000 entries are within the bound: the check goes on to the first entry's name
    folder = _manifest(tmp_path / "many", [{"file": "../x", "size": 16}] * 10_000)
    with pytest.raises(InputError, match=r"shards\[0\]: expected a shard file name and its size in bytes"):
        hub_cache.cached_headers(folder)
    one = _manifest(tmp_path / "one", [{"file": "m.safetensors", "size": 16}])
    body = _header(one, "m.safetensors", 4)
    assert hub_cache.cached_headers(one) == (("m.safetensors", 16, body),)


@pytest.mark.parametrize(
    "entry",
    [
        {"file": "../m.safetensors", "size": 16},  # a path, not one component
        {"file": "m.bin", "size": 16},  # not a .safetensors name
        {"file": 5, "size": 16},
        {"file": "m.safetensors", "size": "16"},
        {"file": "m.safetensors", "size": True},  # a bool is not a byte count
        {"file": "m.safetensors"},
        "m.safetensors",
    ],
)
def test_each_bad_entry_alone_is_refused(tmp_path: Path, entry: object) -> None:
    folder = _manifest(tmp_path / "snap", [{"file": "a.safetensors", "size": 16}, entry])
    _header(folder, "a.safetensors", 4)
    with pytest.raises(InputError, match=r"shards\[1\]: expected a shard file name and its size in bytes"):
        hub_cache.cached_headers(folder)


def test_a_shard_is_at_least_its_8_byte_length(tmp_path: Path) -> None:
    # the smallest safetensors file is the 8-byte header length with an empty header
    folder = _manifest(tmp_path / "ok", [{"file": "m.safetensors", "size": 8}])
    body = _header(folder, "m.safetensors", 0)
    assert hub_cache.cached_headers(folder) == (("m.safetensors", 8, body),)
    folder = _manifest(tmp_path / "short", [{"file": "m.safetensors", "size": 7}])
    _header(folder, "m.safetensors", 0)
    with pytest.raises(limits.LimitError, match=r"shards\[0\]\.size"):
        hub_cache.cached_headers(folder)


def test_the_read_stops_one_byte_past_the_largest_header(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # with a 100-byte cap: a 100-byte header is read whole (8 + 100 = 108 bytes), and of a longer file exactly
    # 8 + 100 + 1 = 109 bytes come back, one past the cap, so the reader sees that more bytes were cached than named
    monkeypatch.setattr(limits, "MAX_SAFETENSORS_HEADER_BYTES", 100)
    folder = _manifest(
        tmp_path / "snap", [{"file": "a.safetensors", "size": 4096}, {"file": "b.safetensors", "size": 4096}]
    )
    whole = _header(folder, "a.safetensors", 100)
    _header(folder, "b.safetensors", 100, extra=50)
    (a, b) = hub_cache.cached_headers(folder)
    assert a[2] == whole and len(whole) == 108
    assert len(b[2]) == 109
