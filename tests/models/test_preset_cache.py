"""configs/__pycache__/: each shipped preset's entry, written by a first read, reads exactly as its YAML does; a
stale or damaged entry is never read and is rewritten; a file system that takes no write costs only speed
(kvplan.models.preset_cache)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kvplan.models import preset_cache
from kvplan.models.preset_cache import builtin_doc, entry_path, entry_text, text_key
from kvplan.models.presets import configs_root
from kvplan.models.reader import Doc, parse_text

ROOT = configs_root()
SHIPPED = sorted(p.relative_to(ROOT).as_posix() for p in ROOT.rglob("*.yaml") if "__pycache__" not in p.parts)


def _same(a: Doc, b: Doc) -> bool:
    # repr tells 1 from 1.0 and True, and keeps the keys' order, which == on dicts does not
    def key(d: Doc) -> tuple[str, str, str, bool]:
        return repr(d.data), d.source, repr(dict(d.lines)), d.strict

    return key(a) == key(b)


@pytest.fixture(scope="module")
def copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shipped configs/ without its entries: the first read of each preset writes its own."""
    root = tmp_path_factory.mktemp("cfg") / "configs"
    shutil.copytree(ROOT, root, ignore=shutil.ignore_patterns("__pycache__"))
    return root


@pytest.mark.parametrize("relative", SHIPPED)
def test_each_preset_writes_an_entry_that_reads_as_its_yaml(
    relative: str, copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = (copy / relative).read_text(encoding="utf-8")
    from_yaml = parse_text(text, "s")
    assert not entry_path(copy, relative).exists()
    assert _same(builtin_doc(copy, relative, "s"), from_yaml)  # the first read: the YAML, and the entry written
    assert entry_path(copy, relative).read_text(encoding="utf-8") == entry_text(from_yaml, text)

    def no_yaml(*_: object) -> Doc:
        raise AssertionError("a fresh entry is read without yaml")

    monkeypatch.setattr(preset_cache, "parse_text", no_yaml)
    assert _same(builtin_doc(copy, relative, "s"), from_yaml)
    assert [p.name for p in entry_path(copy, relative).parent.iterdir() if p.suffix == ".tmp"] == []


def test_a_file_system_that_takes_no_write_reads_the_yaml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a read-only install: every open for writing fails; the document is the YAML's each time, and no error shows
    root = _tree(tmp_path, "a: 1\n")

    def refuse(*_: object, **__: object) -> int:
        raise PermissionError(13, "read-only file system")

    monkeypatch.setattr(preset_cache.os, "open", refuse)
    assert builtin_doc(root, "a.yaml", "s").data == {"a": 1}
    assert not entry_path(root, "a.yaml").exists()


def test_a_value_json_cannot_carry_is_read_from_the_yaml(tmp_path: Path) -> None:
    # YAML reads 2026-12-07 as a date, which JSON has no type for: no entry, the YAML's date every time
    root = _tree(tmp_path, "a: 2026-12-07\n")
    assert str(builtin_doc(root, "a.yaml", "s").data["a"]) == "2026-12-07"
    assert not entry_path(root, "a.yaml").exists()


def _tree(tmp_path: Path, text: str) -> Path:
    (tmp_path / "a.yaml").write_text(text, encoding="utf-8")
    return tmp_path


def test_an_entry_written_from_other_text_is_not_read(tmp_path: Path) -> None:
    # the YAML was edited after its entry was written (same length, one digit changed: the CRC tells them apart)
    root = _tree(tmp_path, "a: 1\nb:\n  - 2\n")
    entry_path(root, "a.yaml").parent.mkdir()
    entry_path(root, "a.yaml").write_text(entry_text(parse_text("a: 1\nb:\n  - 2\n", "x"), "a: 1\nb:\n  - 2\n"))
    (root / "a.yaml").write_text("a: 7\nb:\n  - 2\n", encoding="utf-8")
    doc = builtin_doc(root, "a.yaml", "a.yaml (built-in)")
    assert doc.data == {"a": 7, "b": [2]} and doc.source == "a.yaml (built-in)"
    assert doc.line(("b", 0)) == 3
    assert builtin_doc(root, "a.yaml", "s").data == {"a": 7, "b": [2]}  # and its entry was rewritten from the edit
    assert '"a":7' in entry_path(root, "a.yaml").read_text(encoding="utf-8")


@pytest.mark.parametrize("raw", ["", "{", "[]", '{"text": 1}', '{"data": {}}', "null"])
def test_a_missing_or_damaged_entry_falls_back_to_the_yaml(tmp_path: Path, raw: str) -> None:
    root = _tree(tmp_path, "a: 1\n")
    if raw:
        entry_path(root, "a.yaml").parent.mkdir()
        entry_path(root, "a.yaml").write_text(raw, encoding="utf-8")
    assert builtin_doc(root, "a.yaml", "s").data == {"a": 1}


def test_an_entry_keeps_types_lines_and_order(tmp_path: Path) -> None:
    text = "z: 1.0\nb: true\nc: null\nd: 128K\ne:\n  - {x: 2}\nbig: 123456789012345678901234567890\n"
    root = _tree(tmp_path, text)
    builtin_doc(root, "a.yaml", "s")  # writes the entry
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
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns("__pycache__"))
    builtin_doc(copy, "gpus.yaml", "s")  # the entry of the unedited catalog
    gpus_yaml = copy / "gpus.yaml"
    gpus_yaml.write_text(gpus_yaml.read_text(encoding="utf-8").replace("name: NVIDIA H200", "name: NVIDIA H200 X", 1))
    from kvplan.models import gpus

    monkeypatch.setattr(gpus, "configs_root", lambda: copy)
    catalog, _ = gpus._gpu_table.__wrapped__()
    assert catalog["h200"].name == "NVIDIA H200 X"
