"""What a lock entry must hold beyond each field's type and bounds, and the digest of a lock's entries (pure).

A lock is a CI gate's baseline, so a hand edit must never read as a pass. Two guards:

- the fields an entry carries are related by construction (``kvplan.plan.gate.figures``): an entry that breaks
  one of those relations was not written by kvplan, and the error names the field;
- the lock carries ``digest``, a SHA-256 of its ``configs`` in canonical JSON (as ``poetry.lock`` carries its
  content hash): any other edit, even one that keeps every relation, is a digest mismatch.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from kvplan.errors import InputError
from kvplan.models.deploy import ENGINES
from kvplan.models.formats import MlaLayout
from kvplan.versions import parse_version

DIGEST_PREFIX = "sha256:"
KV_FORMATS = frozenset({*(m.value for m in MlaLayout), "bf16", "fp16", "fp8_e4m3", "fp8_e5m2"})
"""What ``PoolPlan.kv_format`` prints: an MLA layout, or the KV dtype (bfloat16 and float16 shortened)."""
REBUILD = "run `kvplan lock` to rebuild it"


def entries_digest(configs: Mapping[str, Any]) -> str:
    """SHA-256 of the entries as canonical JSON (sorted keys, no spaces, ASCII): the same for any layout."""
    text = json.dumps(configs, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return DIGEST_PREFIX + hashlib.sha256(text.encode("ascii")).hexdigest()


def check_digest(doc: Mapping[str, Any]) -> str | None:
    """Why the lock's entries are not the ones kvplan wrote, to follow the lock's name (None: they are)."""
    digest = doc.get("digest")
    if digest is None:
        return "has no digest (written before lock schema 3, or edited by hand)"
    if not isinstance(digest, str) or digest != entries_digest(doc["configs"]):
        return "was edited by hand (digest mismatch)"
    return None


def check_engine(value: str, at: str) -> None:
    """``ENGINE VERSION``: an engine kvplan plans and a version of ASCII digits it parses."""
    name, _, version = value.partition(" ")
    if name not in ENGINES:
        raise InputError(f"{at}: {value!r} is not an engine kvplan plans ({', '.join(ENGINES)}); {REBUILD}")
    try:
        if not version.isascii():
            raise InputError("not ASCII")
        parse_version(version)
    except InputError:
        raise InputError(f"{at}: {value!r} has no version of ASCII digits (e.g. {name} {ENGINES[name][0]})") from None


def check_format(value: str, at: str) -> None:
    if value not in KV_FORMATS:
        raise InputError(f"{at}: {value!r} is not a KV format kvplan writes ({', '.join(sorted(KV_FORMATS))})")


def check_invariants(v: Mapping[str, Any], where: str) -> None:
    """The relations ``figures`` builds into every entry; the first one broken is named with its field."""
    check_engine(v["engine"], f"{where}.engine")
    check_format(v["mla_layout"], f"{where}.mla_layout")
    for key, want, why in _equalities(v):
        if v[key] != want:
            raise InputError(f"{where}.{key}: {v[key]:,}, but {why} is {want:,}; {REBUILD}")
    for key, ok, why in _bounds(v):
        if not ok:
            raise InputError(f"{where}.{key}: {v[key]:,} {why}; {REBUILD}")
    for ctx, n in v["concurrency"].items():
        if n and int(ctx) > v["largest_admitted_ctx"]:
            raise InputError(
                f"{where}.concurrency.{ctx}: {n} requests of {int(ctx):,} tokens, but largest_admitted_ctx is "
                f"{v['largest_admitted_ctx']:,}; {REBUILD}"
            )


def _equalities(v: Mapping[str, Any]) -> list[tuple[str, int, str]]:
    rows = [
        # CellBytes.total_bytes: main + indexer + draft main + draft indexer (figures sums the draft terms)
        ("cell_bytes", v["main_bytes_per_row"] + v["indexer_bytes_per_row"] + v["draft_bytes_per_row"],
         "main_bytes_per_row + indexer_bytes_per_row + draft_bytes_per_row"),
        # PoolPlan.logical_page_tokens = page_tokens × dcp
        ("logical_page_tokens", v["rank_page_tokens"] * v["dcp"], "rank_page_tokens × dcp"),
    ]  # fmt: skip
    if v["engine"].startswith("sglang "):
        # SGLang's max_total_num_tokens= line prints S·dcp (model_runner.py logical_max_total_num_tokens;
        # shared/reference/sglang-0.5.23.md §2.4); kvplan's pool_tokens is that line, hybrids included
        rows.append(("pool_tokens", v["pool_rows_per_gpu"] * v["dcp"], "pool_rows_per_gpu × dcp"))
    return rows


def _bounds(v: Mapping[str, Any]) -> list[tuple[str, bool, str]]:
    rows_dcp = v["pool_rows_per_gpu"] * v["dcp"]
    out = [
        # vLLM: num_blocks × 64 × dcp; a hybrid group's tokens are fewer (kv_cache_utils, GPU KV cache size)
        ("pool_tokens", v["pool_tokens"] <= rows_dcp, f"is over pool_rows_per_gpu × dcp ({rows_dcp:,})"),
        # rows are whole pages: SGLang `// page_size * page_size` (calculate_pool_sizes), vLLM blocks × block_size
        ("pool_rows_per_gpu", v["pool_rows_per_gpu"] % v["rank_page_tokens"] == 0,
         f"is not whole pages of rank_page_tokens ({v['rank_page_tokens']:,})"),
        ("usable_pages", v["usable_pages"] * v["rank_page_tokens"] <= v["pool_rows_per_gpu"],
         f"pages of {v['rank_page_tokens']:,} tokens are more than pool_rows_per_gpu ({v['pool_rows_per_gpu']:,})"),
    ]  # fmt: skip
    if v["engine_starts"]:
        # a plan without a startup error built a pool (the engines refuse to start with no KV budget)
        for key in ("pool_tokens", "cell_bytes", "main_bytes_per_row", "available_bytes", "usable_pages",
                    "max_running_requests"):  # fmt: skip
            out.append((key, v[key] >= 1, "is under 1, but engine_starts is true (a started engine has a pool)"))
        out.append(("largest_admitted_ctx", v["largest_admitted_ctx"] <= v["pool_tokens"],
                    f"is over pool_tokens ({v['pool_tokens']:,})"))  # fmt: skip
    else:
        out.append(("largest_admitted_ctx", v["largest_admitted_ctx"] == 0, "but engine_starts is false"))
    return out
