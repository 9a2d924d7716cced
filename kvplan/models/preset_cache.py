"""The built-in presets parsed ahead of time: configs/parsed/ holds each shipped YAML file's data and key lines as JSON,
so a command on built-in presets loads no yaml (its import is about 9.6 ms and three documents 3.6 ms of
`kvplan admit --ctx 1M`'s start-up, against 0.3 ms for the JSON), the way Python keeps a module's bytecode.

An entry is used only when it was written from the very text of the YAML beside it (its length and CRC-32): an
edited preset without a regenerated entry is parsed as YAML, as before, so a stale entry is slower, never wrong.
`python scripts/parse_presets.py` rewrites every entry; tests/models/test_preset_cache.py checks that each one
is fresh and equal to what kvplan.models.reader reads from the YAML."""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Any

from kvplan.models.reader import Doc, Path_, parse_text

PARSED = "parsed"
"""The entries' folder under configs/, mirroring it: parsed/models/glm-5.3.json for models/glm-5.3.yaml."""


def text_key(text: str) -> str:
    """What an entry was written from: the YAML text's length in characters and its CRC-32 (zlib, loaded already)."""
    return f"{len(text)}:{zlib.crc32(text.encode('utf-8')):08x}"


def entry_path(root: Path, relative: str) -> Path:
    """The entry of the YAML file ``relative`` (to configs/, '/'-separated)."""
    return root / PARSED / f"{relative.rsplit('.', 1)[0]}.json"


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


def builtin_doc(root: Path, relative: str, source: str) -> Doc:
    """The shipped YAML file ``relative`` (to ``root``, the configs folder) as kvplan.models.reader.parse_text reads
    it: from its entry when that is fresh, else from the YAML."""
    text = (root / relative).read_text(encoding="utf-8")
    try:
        found = _entry(entry_path(root, relative).read_text(encoding="utf-8"), text)
    except OSError:
        found = None
    if found is None:
        return parse_text(text, source)
    data, lines = found
    return Doc(data, source, lines)
