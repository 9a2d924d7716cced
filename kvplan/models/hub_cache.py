"""kvplan's own cache of what it fetched from the Hugging Face Hub: configs and safetensors headers, never weights.

``--model ORG/NAME[@REV]`` not in the Hugging Face cache is fetched by kvplan.models.hub into
``<cache>/hub/models--ORG--NAME/<commit>/``: config.json, hf_quant_config.json and model.safetensors.index.json
as the Hub serves them, each shard's first 8 + n bytes (its length and JSON header) under ``headers/``, and
``kvplan-headers.json`` naming each shard with its full size (the header's data offsets are checked against it).
This is never Hugging Face's own cache: a folder of headers there would look like a snapshot to the engines.
This module only reads (it is imported by the checkpoint reader, which must not import the network code).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from kvplan import limits
from kvplan.errors import InputError

HEADERS_NAME = "kvplan-headers.json"
"""The manifest of a header-only snapshot: {"repo", "revision", "shards": [{"file", "size"}]}."""
HEADERS_DIR = "headers"
SHARD_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}\.safetensors$")
"""A shard file name as an index may name it: one path component, never '..' or a folder."""
MAX_SHARDS = 10_000
"""Most shards one checkpoint may have (DeepSeek-V3 has 163; Kimi-K2 INT4 64)."""


def kvplan_cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """KVPLAN_CACHE_DIR, else $XDG_CACHE_HOME/kvplan, else ~/.cache/kvplan (the XDG base directory rule)."""
    env = os.environ if env is None else env
    if env.get("KVPLAN_CACHE_DIR"):
        return Path(env["KVPLAN_CACHE_DIR"]).expanduser()
    base = Path(env["XDG_CACHE_HOME"]).expanduser() if env.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    return base / "kvplan"


def repo_folder(repo_id: str, env: Mapping[str, str] | None = None) -> Path:
    """Where kvplan keeps what it fetched of ``repo_id`` (already validated: ORG/NAME, no '..')."""
    org, name = repo_id.split("/")
    return kvplan_cache_dir(env) / "hub" / f"models--{org}--{name}"


def cached_headers(folder: Path) -> tuple[tuple[str, int, bytes], ...]:
    """(shard file, its full size, its JSON header bytes) for each shard of a header-only snapshot."""
    manifest = folder / HEADERS_NAME
    where = f"{manifest}"
    doc = limits.strict_json(limits.read_text(manifest, limits.CONFIG, "header manifest"))
    shards = doc.get("shards") if isinstance(doc, dict) else None
    if not isinstance(shards, list) or not 0 < len(shards) <= MAX_SHARDS:
        raise InputError(f"{where}: shards: expected 1 to {MAX_SHARDS:,} entries; remove {folder} and fetch again")
    out = []
    for i, entry in enumerate(shards):
        name = entry.get("file") if isinstance(entry, dict) else None
        size = entry.get("size") if isinstance(entry, dict) else None
        if not isinstance(name, str) or not SHARD_NAME.match(name) or type(size) is not int:
            raise InputError(f"{where}: shards[{i}]: expected a shard file name and its size in bytes")
        limits.bounded_int(size, name=f"{where}: shards[{i}].size", low=8, high=limits.MAX_GPU_BYTES)
        path = folder / HEADERS_DIR / name
        with limits.open_regular(path, "safetensors header") as f:
            raw = f.read(limits.MAX_SAFETENSORS_HEADER_BYTES + 9)
        out.append((name, size, raw))
    return tuple(out)
