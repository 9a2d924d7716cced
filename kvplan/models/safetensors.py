"""A checkpoint's tensors as its files list them: safetensors headers, a snapshot's shards, the shard index.

A ``*.safetensors`` file starts with an 8-byte little-endian header length N, then N bytes of JSON: for every
tensor its ``dtype``, ``shape`` and ``data_offsets`` (and an optional ``__metadata__`` of strings). kvplan reads
only that header (never the tensor data), so a 700 GB snapshot is sized in milliseconds. With only
``model.safetensors.index.json`` (the shards not downloaded), :func:`reconcile` checks the tensors derived from
``config.json`` (kvplan.models.config_tensors) against the index's ``metadata.total_size`` to the byte, saying what
is left unexplained."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvplan import limits
from kvplan.errors import ConfigError, InputError
from kvplan.models import hub_cache
from kvplan.models.index_bounds import refuse_many_tensors

DTYPE_BITS = {
    "BOOL": 8, "U8": 8, "I8": 8, "F8_E4M3": 8, "F8_E5M2": 8, "F8_E8M0": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6,
    "I16": 16, "U16": 16, "F16": 16, "BF16": 16, "I32": 32, "U32": 32, "F32": 32, "I64": 64, "U64": 64,
    "F64": 64, "C64": 64,
}  # fmt: skip
"""Bits per element of each safetensors dtype (the format's ``Dtype`` enum)."""


# --------------------------------------------------------------------------- tensors and headers


@dataclass(frozen=True)
class Tensor:
    """One tensor of a checkpoint: its name, safetensors dtype and shape; or, with ``count`` > 1, that many routed
    experts' alike tensors, experts N .. N + count − 1 where the name says ``.experts.N.`` (a config's layout:
    GLM-5.3's 116,736 expert tensors as 456 entries; :func:`expanded` names each one)."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    count: int = 1

    @property
    def numel(self) -> int:
        """Elements of all ``count`` tensors."""
        return math.prod(self.shape) * self.count

    @property
    def nbytes(self) -> int:
        """Bytes of all ``count`` tensors (each rounded up to a whole byte, as each is stored)."""
        return -(-math.prod(self.shape) * DTYPE_BITS[self.dtype] // 8) * self.count


def expanded(tensors: Iterable[Tensor]) -> Iterator[Tensor]:
    """Every tensor one at a time, each with its own name (a run of experts as its ``count`` tensors)."""
    for t in tensors:
        if t.count == 1:
            yield t
            continue
        head, _, tail = t.name.partition(".experts.")
        first, _, rest = tail.partition(".")
        for e in range(int(first), int(first) + t.count):
            yield Tensor(f"{head}.experts.{e}.{rest}", t.dtype, t.shape)


def _strict_json(text: str, where: str) -> Any:
    """JSON by kvplan's one strict reader (limits.strict_json), errors located by file and line."""
    try:
        return limits.strict_json(text)
    except limits.JsonError as e:
        at = f"{where}:{e.line}" if e.line is not None else where
        raise limits.JsonError(f"{at}: {e.problem}", line=e.line, key=e.key) from None


def _dims(value: Any, where: str) -> tuple[int, ...]:
    if not isinstance(value, list) or len(value) > 8:
        raise InputError(f"{where}: expected a list of at most 8 dimensions")
    for d in value:
        if isinstance(d, bool) or not isinstance(d, int) or d < 0 or d > limits.MAX_TOKENS:
            raise InputError(f"{where}: {ascii(d)[:40]} is not a dimension (0 .. {limits.MAX_TOKENS:,})")
    return tuple(value)


def read_safetensors_header(path: Path) -> tuple[Tensor, ...]:
    """Every tensor of one ``.safetensors`` file, from its header alone (the tensor data is never read).

    The header length is bounded by ``limits.MAX_SAFETENSORS_HEADER_BYTES``; each entry's ``data_offsets`` must
    span exactly its dtype × shape bytes inside the file, so a truncated or forged header is an error.
    """
    where = f"safetensors file {path}"
    st = limits.check_regular(path, "safetensors file")
    with limits.open_regular(path, "safetensors file") as f:
        head = f.read(8)
        n = header_length(head, st.st_size, where)
        raw = f.read(n)
    return parse_safetensors_header(raw, st.st_size, where)


def header_length(head: bytes, file_size: int, where: str) -> int:
    """The JSON header's length from a safetensors file's first 8 bytes, bounded by the file and kvplan's cap."""
    if len(head) < 8:
        raise InputError(f"{where}: shorter than the 8-byte header length; not a safetensors file")
    n = int.from_bytes(head[:8], "little")
    cap = limits.MAX_SAFETENSORS_HEADER_BYTES
    if n > cap:
        raise limits.LimitError(f"{where}: a {n:,}-byte header is over kvplan's limit of {cap:,} bytes")
    if n + 8 > file_size:
        raise InputError(f"{where}: the header claims {n:,} bytes but only {file_size - 8:,} follow its 8-byte length")
    return n


def parse_safetensors_header(raw: bytes, file_size: int, where: str) -> tuple[Tensor, ...]:
    """The tensors a safetensors JSON header (``raw``, after the 8-byte length) lists, checked against the size
    of the whole file: a local shard's, or the Hub's Content-Range total (kvplan.models.hub)."""
    n = len(raw)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{where}: the header is not valid UTF-8; not a safetensors file") from None
    doc = _strict_json(text, where)
    if not isinstance(doc, dict):
        raise InputError(f"{where}: the header is not a JSON object")
    data_bytes = file_size - 8 - n
    out = []
    for name, entry in doc.items():
        if name == "__metadata__":
            continue
        at = f"{where}: {name[:120]}"
        if not isinstance(entry, dict) or set(entry) != {"dtype", "shape", "data_offsets"}:
            raise InputError(f"{at}: expected dtype, shape and data_offsets")
        dtype = entry["dtype"]
        if not isinstance(dtype, str) or dtype not in DTYPE_BITS:
            raise InputError(f"{at}.dtype: {str(dtype)[:20]!r} is not a safetensors dtype")
        t = Tensor(name, dtype, _dims(entry["shape"], f"{at}.shape"))
        offsets = _dims(entry["data_offsets"], f"{at}.data_offsets")
        begin, end = offsets if len(offsets) == 2 else (-1, -1)
        if not 0 <= begin <= end <= data_bytes or end - begin != t.nbytes:
            raise InputError(
                f"{at}.data_offsets: {entry['data_offsets']!r} does not hold {t.nbytes:,} bytes of {dtype}"
                f" {list(t.shape)} inside the file's {data_bytes:,} data bytes"
            )
        out.append(t)
    return tuple(out)


def snapshot_shards(folder: Path) -> tuple[Path, ...]:
    """The ``*.safetensors`` files of a snapshot folder, sorted (what the engines load)."""
    try:
        return tuple(sorted(p for p in folder.glob("*.safetensors") if p.is_file()))
    except OSError as e:
        raise InputError(f"snapshot {folder}: cannot list: {e.strerror or e}") from None


def _shard_tensors(folder: Path) -> Iterator[tuple[Path, tuple[Tensor, ...]]]:
    """Each shard with its tensors: the files' headers, or the headers kvplan fetched from the Hub (hub_cache)."""
    if not (folder / hub_cache.HEADERS_NAME).is_file():
        yield from ((shard, read_safetensors_header(shard)) for shard in snapshot_shards(folder))
        return
    for name, size, raw in hub_cache.cached_headers(folder):
        where = f"safetensors header {folder / hub_cache.HEADERS_DIR / name}"
        n = header_length(raw, size, where)
        if len(raw) != 8 + n:
            raise InputError(f"{where}: {len(raw) - 8:,} header bytes cached, {n:,} expected; remove it to fetch again")
        yield Path(name), parse_safetensors_header(raw[8:], size, where)


def has_shards(folder: Path) -> bool:
    """Whether ``folder`` has safetensors shards, or the headers of a Hub model's shards (hub_cache)."""
    return bool(snapshot_shards(folder)) or (folder / hub_cache.HEADERS_NAME).is_file()


def snapshot_tensors(folder: Path) -> tuple[Tensor, ...]:
    """Every tensor of every ``*.safetensors`` file in a snapshot folder (a name twice is an error)."""
    seen: dict[str, Path] = {}
    out: list[Tensor] = []
    for shard, tensors in _shard_tensors(folder):
        for t in tensors:
            if t.name in seen:
                raise InputError(
                    f"snapshot {folder}: tensor {t.name[:120]} is in both {seen[t.name].name} and {shard.name}"
                )
            seen[t.name] = shard
            out.append(t)
    return tuple(out)


_LAYER = re.compile(r"(?:^|\.)layers\.(\d{1,9})\.")
"""Buffers some checkpoints carry that no engine loads."""


# --------------------------------------------------------------------------- index.json


@dataclass(frozen=True)
class CheckpointIndex:
    """``model.safetensors.index.json``: the total size of the shards and every tensor name."""

    source: str
    total_size: int
    names: tuple[str, ...]


def read_index(path: Path) -> CheckpointIndex:
    where = f"checkpoint index {path}"
    text = limits.read_text(path, limits.CHECKPOINT_INDEX, "checkpoint index")
    refuse_many_tensors(path, text.count('.safetensors"'))  # each entry names its shard: counted before the parse
    doc = _strict_json(text, where)
    del text
    meta = doc.get("metadata") if isinstance(doc, dict) else None
    wmap = doc.get("weight_map") if isinstance(doc, dict) else None
    if not isinstance(wmap, dict) or not set(map(type, wmap.values())) <= {str}:
        raise ConfigError("expected an object of tensor name -> shard file", source=str(path), key="weight_map")
    refuse_many_tensors(path, len(wmap))  # shard files not named *.safetensors
    total = meta.get("total_size") if isinstance(meta, dict) else None
    if isinstance(total, float) and total.is_integer():
        total = int(total)  # some exporters write 1.5e10
    if isinstance(total, bool) or not isinstance(total, int):
        raise ConfigError("expected the shards' total size in bytes", source=str(path), key="metadata.total_size")
    limits.bounded_int(total, name=f"{where}: metadata.total_size", low=0, high=limits.MAX_GPU_BYTES)
    return CheckpointIndex(str(path), total, tuple(wmap))


@dataclass(frozen=True, kw_only=True)
class Reconciliation:
    """The config-derived tensors checked against an index's ``metadata.total_size``, to the byte."""

    total_size: int
    explained_bytes: int
    """Bytes of the config-derived tensors whose names the index lists."""
    unknown_names: tuple[str, ...]
    """In the index, not derived from the config (their bytes are the unexplained part)."""
    missing_names: tuple[str, ...]
    """Derived from the config, absent from the index (not counted)."""

    @property
    def unexplained_bytes(self) -> int:
        return self.total_size - self.explained_bytes

    @property
    def unexplained_ppm(self) -> int:
        """Unexplained bytes in parts per million of total_size (rounded toward zero)."""
        return self.unexplained_bytes * 1_000_000 // self.total_size if self.total_size else 0


def reconcile(index: CheckpointIndex, tensors: Iterable[Tensor]) -> Reconciliation:
    derived = {t.name: t for t in expanded(tensors)}
    listed = set(index.names)
    return Reconciliation(
        total_size=index.total_size,
        explained_bytes=sum(t.nbytes for n, t in derived.items() if n in listed),
        unknown_names=tuple(n for n in index.names if n not in derived),
        missing_names=tuple(n for n in derived if n not in listed),
    )


def listed_only(tensors: Iterable[Tensor], names: set[str]) -> tuple[Tensor, ...]:
    """The tensors ``names`` lists: a run of experts stays one entry when it lists all of them."""
    out: list[Tensor] = []
    for t in tensors:
        if t.count == 1:
            if t.name in names:
                out.append(t)
            continue
        each = tuple(expanded((t,)))
        if all(u.name in names for u in each):
            out.append(t)
        else:
            out.extend(u for u in each if u.name in names)
    return tuple(out)


# --------------------------------------------------------------------------- a snapshot's shard index

INDEX_NAME = "model.safetensors.index.json"


def indexer_layers_shipped(tensors: Iterable[Tensor], num_layers: int) -> int:
    """Decoder layers (MTP excluded) with indexer weights among ``tensors``."""
    layers = set()
    for t in tensors:
        if ".indexer." in t.name:
            m = _LAYER.search(t.name)
            if m and int(m.group(1)) < num_layers:
                layers.add(int(m.group(1)))
    return len(layers)
