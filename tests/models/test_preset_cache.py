"""configs/parsed/: each shipped preset's entry is fresh and reads exactly as its YAML does; a stale or damaged
entry is never read (kvplan.models.preset_cache)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kvplan.models import preset_cache
from kvplan.models.preset_cache import builtin_doc, entry_path, entry_text, text_key
from kvplan.models.presets import configs_root
from kvplan.models.reader import Doc, parse_text

ROOT = configs_root()
SHIPPED = sorted(p.relative_to(ROOT).as_posix() for p in ROOT.rglob("*.yaml") if p.parent.name != "parsed")
REGENERATE = "run `python scripts/parse_presets.py`"


def _same(a: Doc, b: Doc) -> bool:
    # repr tells 1 from 1.0 and True, and keeps the keys' order, which == on dicts does not
    def key(d: Doc) -> tuple[str, str, str, bool]:
        return repr(d.data), d.source, repr(dict(d.lines)), d.strict

    return key(a) == key(b)


@pytest.mark.parametrize("relative", SHIPPED)
def test_each_preset_reads_from_a_fresh_entry_as_its_yaml(relative: str, monkeypatch: pytest.MonkeyPatch) -> None:
    text = (ROOT / relative).read_text(encoding="utf-8")
    from_yaml = parse_text(text, "s")
    assert entry_path(ROOT, relative).is_file(), f"{relative}: no entry; {REGENERATE}"
    assert entry_path(ROOT, relative).read_text(encoding="utf-8") == entry_text(from_yaml, text), REGENERATE

    def no_yaml(*_: object) -> Doc:
        raise AssertionError("a fresh entry is read without yaml")

    monkeypatch.setattr(preset_cache, "parse_text", no_yaml)
    assert _same(builtin_doc(ROOT, relative, "s"), from_yaml)


def test_the_generator_agrees_with_the_tree() -> None:
    script = Path(__file__).resolve().parents[2] / "scripts" / "parse_presets.py"
    proc = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _tree(tmp_path: Path, text: str) -> Path:
    (tmp_path / "parsed").mkdir()
    (tmp_path / "a.yaml").write_text(text, encoding="utf-8")
    return tmp_path


def test_an_entry_written_from_other_text_is_not_read(tmp_path: Path) -> None:
    # the YAML was edited after its entry was written (same length, one digit changed: the CRC tells them apart)
    root = _tree(tmp_path, "a: 1\nb:\n  - 2\n")
    entry_path(root, "a.yaml").write_text(entry_text(parse_text("a: 1\nb:\n  - 2\n", "x"), "a: 1\nb:\n  - 2\n"))
    (root / "a.yaml").write_text("a: 7\nb:\n  - 2\n", encoding="utf-8")
    doc = builtin_doc(root, "a.yaml", "a.yaml (built-in)")
    assert doc.data == {"a": 7, "b": [2]} and doc.source == "a.yaml (built-in)"
    assert doc.line(("b", 0)) == 3


@pytest.mark.parametrize("raw", ["", "{", "[]", '{"text": 1}', '{"data": {}}', "null"])
def test_a_missing_or_damaged_entry_falls_back_to_the_yaml(tmp_path: Path, raw: str) -> None:
    root = _tree(tmp_path, "a: 1\n")
    if raw:
        entry_path(root, "a.yaml").write_text(raw, encoding="utf-8")
    assert builtin_doc(root, "a.yaml", "s").data == {"a": 1}


def test_an_entry_keeps_types_lines_and_order(tmp_path: Path) -> None:
    text = "z: 1.0\nb: true\nc: null\nd: 128K\ne:\n  - {x: 2}\nbig: 123456789012345678901234567890\n"
    root = _tree(tmp_path, text)
    entry_path(root, "a.yaml").write_text(entry_text(parse_text(text, "s"), text), encoding="utf-8")
    doc = builtin_doc(root, "a.yaml", "s")
    assert _same(doc, parse_text(text, "s"))
    assert list(doc.data) == ["z", "b", "c", "d", "e", "big"] and doc.line(("e", 0, "x")) == 6


def test_the_key_tells_edits_apart() -> None:
    # CRC-32 of b"a: 1\n" is 0xe3231969 (zlib.crc32, ITU-T V.42); one changed digit, or the same bytes longer, differ
    assert text_key("a: 1\n") == "5:e3231969"
    assert len({text_key("a: 1\n"), text_key("a: 2\n"), text_key("a: 1\n\n")}) == 3


def test_gpus_yaml_and_the_presets_read_through_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a copy of configs/ with gpus.yaml edited and its entry left stale: the catalog reads the edit
    copy = tmp_path / "configs"
    shutil.copytree(ROOT, copy)
    gpus_yaml = copy / "gpus.yaml"
    gpus_yaml.write_text(gpus_yaml.read_text(encoding="utf-8").replace("name: NVIDIA H200", "name: NVIDIA H200 X", 1))
    from kvplan.models import gpus

    monkeypatch.setattr(gpus, "configs_root", lambda: copy)
    catalog, _ = gpus._gpu_table.__wrapped__()
    assert catalog["h200"].name == "NVIDIA H200 X"
