"""Fuzz engine_version (kvplan/versions.py): any text is a row of the table or one InputError line.

Properties: a version is parsed or refused with one line (never another exception); a modelled version plans
exactly as the row's other versions do (the rules are the row's, not the string's); the rows never overlap.
A pre-release or dev build takes its release's row; a post-release sorts after its release (PEP 440), so it takes
the row holding (release, post number): a row may start at one (SGLang 0.5.8.post1).
"""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from kvplan.errors import InputError
from kvplan.versions import SGLANG, VLLM, parse_version, post_release, rules_for

releases = st.tuples(st.integers(0, 2), st.integers(0, 40), st.integers(0, 30))
suffixes = st.sampled_from(["", "rc1", ".post1", ".dev3", "a0", ".post2.dev1", "+cu128", "+gabc.d1"])


@given(st.text(max_size=80))
@example("0.5.6\n")  # found by review: a stripped-then-echoed newline put two lines in the error
@example("0.3.0\t")
@example(" 0.5.9")
def test_any_text_is_a_version_or_one_error_line(text: str) -> None:
    for engine in ("sglang", "vllm"):
        try:
            row = rules_for(engine, text)
        except InputError as e:
            assert "\n" not in str(e) and str(e).startswith("engine_version ")
        else:
            assert row.modelled and row.holds(parse_version(text), post_release(text))


@given(releases, suffixes, st.booleans())
def test_a_release_and_its_spellings_take_one_row(release: tuple[int, int, int], suffix: str, tag: bool) -> None:
    plain = ".".join(map(str, release))
    spelled = ("v" if tag else "") + plain + suffix
    assert parse_version(spelled) == release
    post = {".post1": 1, ".post2.dev1": 2}.get(suffix, -1)
    assert post_release(spelled) == post
    for engine, rows in (("sglang", SGLANG), ("vllm", VLLM)):
        holding = [r for r in rows if r.holds(release, post)]
        assert len(holding) <= 1  # rows never overlap
        try:
            row = rules_for(engine, spelled)
        except InputError as e:
            assert not holding or not holding[0].modelled, str(e)
        else:
            assert holding == [row]
