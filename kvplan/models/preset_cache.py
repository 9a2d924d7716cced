"""The built-in presets parsed once and kept as JSON beside them, the way Python keeps a module's bytecode: the first
command that reads a shipped YAML file writes its data and key lines to configs/__pycache__/ (one JSON file per
YAML file), and later commands on built-in presets load no yaml (its import is about 9.6 ms and three documents
3.6 ms of `kvplan admit --ctx 1M`'s start-up, against 0.3 ms for the JSON). Nothing is generated into git.

An entry is used only when it was written from the very text of the YAML beside it (its length and CRC-32): an
edited preset re-parses its YAML and rewrites the entry. The write is atomic (a temporary file renamed over the
entry) and best effort: a read-only install reads its YAML every time, slower and never wrong."""

from __future__ import annotations

import json
import os
import zlib
from pathlib import Path
from typing import Any

from kvplan.models.reader import Doc, Path_, parse_text

CACHE = "__pycache__"
"""The entries' folder under configs/, mirroring it: __pycache__/models/glm-5.3.json for models/glm-5.3.yaml
(ignored by git and left out of the wheel, as Python's own)."""


def text_key(text: str) -> str:
    """What an entry was written from: the YAML text's length in characters and its CRC-32 (zlib, loaded already)."""
    return f"{len(text)}:{zlib.crc32(text.encode('utf-8')):08x}"


def entry_path(root: Path, relative: str) -> Path:
    """The entry of the YAML file ``relative`` (to configs/, '/'-separated)."""
    return root / CACHE / f"{relative.rsplit('.', 1)[0]}.json"


def entry_text(doc: Doc, text: str) -> str:
    """The entry of a document parsed from ``text``: JSON, the lines as [line, *key path] in the reader's order."""
    lines = [[line, *path] for path, line in doc.lines.items()]
    entry = {"text": text_key(text), "data": doc.data, "lines": lines}
    return json.dumps(entry, ensure_ascii=False, allow_nan=False, separators=(",", ":")) + "\n"


def _entry(raw: str, text: str) -> tuple[Any, dict[Path_, int]] | None:
    """The data and lines of an entry written from ``text``; None for any other (stale, foreign or damaged)."""
    try:
        entry = json.loads(raw)
        if entry["text"] != text_key(text):
            return None
        return entry["data"], {tuple(path): line for line, *path in entry["lines"]}
    except (ValueError, TypeError, KeyError):
        return None


def _write(path: Path, text: str) -> None:
    """Best effort, atomic: another process reads the old entry or the new one, never half of one."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # a name of this process's own (tempfile would cost admit about 3 ms of imports)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    except (OSError, ValueError):  # read-only, full or odd file system: the YAML is read next time too
        return


def builtin_doc(root: Path, relative: str, source: str) -> Doc:
    """The shipped YAML file ``relative`` (to ``root``, the configs folder) as kvplan.models.reader.parse_text reads
    it: from its entry when that is fresh, else from the YAML (and the entry written for next time)."""
    text = (root / relative).read_text(encoding="utf-8")
    path = entry_path(root, relative)
    try:
        found = _entry(path.read_text(encoding="utf-8"), text)
    except OSError:
        found = None
    if found is None:
        doc = parse_text(text, source)
        try:
            body = entry_text(doc, text)
        except (TypeError, ValueError):  # a value JSON cannot carry (a YAML date): kept as YAML only
            return doc
        _write(path, body)
        return doc
    data, lines = found
    return Doc(data, source, lines)
