"""kvplan's document reader (kvplan/models/reader.py), pinned at the bounds the mutation check moved: the limits of
kvplan/limits.py (MAX_DEPTH 64 levels, MAX_YAML_ALIASES 100, MAX_YAML_NODES 100,000 values, MAX_INT_DIGITS 30)
at their edges, the line each error names (1-based, as an editor counts), and each typed read's bound.

The YAML event stream (PyYAML ``yaml.parse``) of a flow list of N scalars is StreamStart, DocumentStart,
SequenceStart, N Scalar, SequenceEnd, DocumentEnd, StreamEnd: N + 6 events; its nodes are the list and its N
scalars: N + 1.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvplan.errors import ConfigError, InputError
from kvplan.models.reader import Reader, parse_json, parse_text, read_file


def _error(text: str) -> ConfigError:
    with pytest.raises(ConfigError) as e:
        parse_text(text, "f.yaml")
    return e.value


def _nest(depth: int, inner: str) -> str:
    return "[" * depth + inner + "]" * depth


def test_aliases_that_expand_past_100000_values_are_refused_on_the_anchor_line() -> None:
    # a: 1,000 zeros (1 + 1,000 nodes) on line 2; b: 100 aliases of it (the most allowed), each 1 + 1,000 nodes:
    # 1 + 1,001 + 1 + 100 × 1,001 = 101,103 values > 100,000; the one past the bound is one of a's zeros (line 2)
    text = "# anchors\na: &a [" + "0, " * 1_000 + "]\nb: [" + ", ".join(["*a"] * 100) + "]\n"
    e = _error(text)
    assert (e.line, e.detail) == (2, "expands to more than 100,000 values (YAML aliases?): past kvplan's limit")


def test_a_flow_list_of_200000_events_passes_the_scan_and_one_more_does_not() -> None:
    # N = 199,994 scalars: 200,000 events, none past 2 × 100,000 (the scan); its 199,995 nodes are then past the
    # 100,000 values of the expansion (line 2, where the list is)
    e = _error("# a list\n[" + "0," * 199_994 + "]\n")
    assert (e.line, e.detail) == (2, "expands to more than 100,000 values (YAML aliases?): past kvplan's limit")
    # N = 199,995: the 200,001st event (the stream's end, after the last newline: line 3) stops the scan
    e = _error("# a list\n[" + "0," * 199_995 + "]\n")
    assert (e.line, e.detail) == (3, "more than 100,000 values: past kvplan's limit for a config")


def test_70_sibling_mappings_are_not_70_levels_deep() -> None:
    # each {} opens and closes one level: 70 of them side by side are 2 levels deep, far under 64
    doc = parse_text("{" + ", ".join(f"k{i}: {{}}" for i in range(70)) + "}", "f.yaml")
    assert len(doc.data) == 70


def test_aliases_may_nest_to_twice_the_text_limit() -> None:
    # each anchor's text is 40 levels (under 64); b nests a inside 40 more: a path of 1 + 40 + 40 = 81 keys and
    # indices, under 2 × 64 = 128 (what aliases may build)
    doc = parse_text(f"a: &a {_nest(40, '1')}\nb: {_nest(40, '*a')}\n", "f.yaml")
    value = doc.data["b"]
    for _ in range(80):
        value = value[0]
    assert value == 1
    # a chain of four anchors, 40 levels each: past 128, refused on the line of the value that goes past it
    text = "x1: &x1 " + _nest(40, "1") + "\n"
    for i in range(2, 5):
        text += f"x{i}: &x{i} " + _nest(40, f"*x{i - 1}") + "\n"
    e = _error(text)
    assert e.detail == "nested deeper than kvplan's limit of 64 levels (through aliases)"
    # x4 is 1 + 40 of its own + 40 (x3) + 40 (x2) = 121 deep before x1's text: the 129th level is in x1, line 1
    assert e.line == 1


def test_a_key_is_located_on_its_own_line_and_a_list_item_on_its_own() -> None:
    doc = parse_text("# kinds\nkinds:\n  - a\n  - zz\nn: 0\n", "f.yaml")
    with pytest.raises(ConfigError) as e:
        Reader(doc).get_str_list("kinds", ("a", "b"))
    assert str(e.value) == "f.yaml:4: kinds[1]: expected one of a, b, got 'zz'"
    with pytest.raises(ConfigError) as e:
        Reader(doc).get_int("n")  # the default minimum is 1: 0 is refused, naming key n on line 5
    assert str(e.value) == "f.yaml:5: n: expected an integer >= 1, got 0"
    assert doc.line(("kinds",)) == 2  # the key's line, not its block's (line 3)


def test_an_integer_of_40_characters_is_read_and_41_refused_on_its_line() -> None:
    # the text bound is MAX_INT_DIGITS + 10 = 40 characters (room for '0x', signs, '_' and ':' groups)
    assert parse_text("a: 1\nn: " + "1" * 40 + "\n", "f.yaml").data["n"] == int("1" * 40)
    e = _error("a: 1\nn: " + "1" * 41 + "\n")
    assert (e.line, e.key) == (2, "n")
    assert e.detail == "an integer of 41 characters is past kvplan's limit of 30 digits"


def test_json_with_a_long_integer_and_no_line_from_the_parser_is_located_by_its_digits() -> None:
    # limits.strict_json names no line for a 31-digit integer; the reader finds it on line 3
    with pytest.raises(ConfigError) as e:
        parse_json('{\n "a": 1,\n "n": ' + "1" * 31 + "\n}", "c.json")
    assert e.value.line == 3 and "digits" in str(e.value)
    # an error that is not about digits keeps the parser's own location (none for NaN), even where a string
    # holds a run of 31 digits on line 1
    with pytest.raises(ConfigError) as e:
        parse_json('{"s": "' + "1" * 31 + '",\n "a": NaN}', "c.json")
    assert (e.value.line, e.value.detail) == (None, "NaN is not a number kvplan reads")


def test_a_json_number_written_as_a_string_quotes_40_characters() -> None:
    doc = parse_json(json.dumps({"n": "9" * 50}), "c.json")
    with pytest.raises(ConfigError) as e:
        Reader(doc).get_int("n")
    assert f"got the string '{'9' * 40}' (write it without quotes)" in str(e.value)


def test_a_long_path_is_cut_to_200_characters_and_a_long_message_to_80(tmp_path: Path) -> None:
    # a name of 300 characters (past NAME_MAX 255): the folder check fails, said with the path's first 200
    bad = tmp_path / ("q" * 300) / "c.yaml"
    with pytest.raises(InputError) as e:
        read_file(bad)
    assert str(e.value) == f"{str(bad)[:200]}: cannot read: File name too long"
    # five names of 100: a valid path of 500+ characters that does not exist; the reader's message would pass 400
    # characters, so the path is cut to its first 80
    missing = tmp_path.joinpath(*["d" * 100] * 5, "config.yaml")
    with pytest.raises(InputError) as e:
        read_file(missing)
    assert str(e.value) == f"config file {str(missing)[:80]}…: no such file"


def test_get_bytes_default_minimum_is_one_byte() -> None:
    doc = parse_text("a: 1B\nb: 0B\n", "f.yaml")
    assert Reader(doc).get_bytes("a") == 1
    with pytest.raises(ConfigError) as e:
        Reader(doc).get_bytes("b")
    assert str(e.value) == "f.yaml:2: b: expected a size of at least 1 B, got '0B'"


def test_a_minimum_not_whole_mib_is_said_in_bytes_and_the_maximum_is_inclusive() -> None:
    doc = parse_text("a: 1MiB\nb: 2GiB\n", "f.yaml")
    with pytest.raises(ConfigError) as e:
        Reader(doc).get_bytes("a", minimum=1_048_577)
    assert "expected a size of at least 1048577 B, got '1MiB'" in str(e.value)
    with pytest.raises(ConfigError) as e:
        Reader(doc).get_bytes("a", minimum=2 * 1_048_576)
    assert "expected a size of at least 2 MiB, got '1MiB'" in str(e.value)
    assert Reader(doc).get_bytes("b", maximum=2 * 1024**3) == 2 * 1024**3
    with pytest.raises(ConfigError) as e:
        Reader(doc).get_bytes("b", maximum=2 * 1024**3 - 1)
    assert "above kvplan's limit of 1 GiB for one GPU" in str(e.value)


def test_get_int_minimum_and_maximum_are_inclusive() -> None:
    doc = parse_text("n: 5\n", "f.yaml")
    assert Reader(doc).get_int("n", minimum=5, maximum=5) == 5
    with pytest.raises(ConfigError) as e:
        Reader(doc).get_int("n", minimum=6)
    assert str(e.value) == "f.yaml:1: n: expected an integer >= 6, got 5"
    with pytest.raises(ConfigError) as e:
        Reader(doc).get_int("n", maximum=4)
    assert str(e.value) == "f.yaml:1: n: 5 is above the largest value kvplan accepts here (4)"


def test_values_are_shown_cut_to_one_short_line() -> None:
    doc = parse_text(f"s: {'x' * 58}\nt: {'y' * 59}\nbig: {2**100}\nhuge: {2**101}\n", "f.yaml")
    choices = ("a",)
    # repr of 58 x's is 60 characters: shown whole; 59 y's make 61: cut to 57 + '…'
    with pytest.raises(ConfigError) as e:
        Reader(doc).get_choice("s", choices)
    assert str(e.value).endswith(f"got '{'x' * 58}'")
    with pytest.raises(ConfigError) as e:
        Reader(doc).get_choice("t", choices)
    assert str(e.value).endswith("got '" + "y" * 56 + "…")
    # 2**100 has 101 bits: said by its size; 2**100 - ... at 100 bits and below: shown (cut as text)
    with pytest.raises(ConfigError) as e:
        Reader(doc).get_int("huge", maximum=1)
    assert "a 102-bit integer is above" in str(e.value)
    with pytest.raises(ConfigError) as e:
        Reader(doc).get_int("big", maximum=1)
    assert "a 101-bit integer is above" in str(e.value)
    small = parse_text(f"n: {2**99}\n", "f.yaml")  # 100 bits: shown as its digits
    with pytest.raises(ConfigError) as e:
        Reader(small).get_int("n", maximum=1)
    assert f"{2**99} is above" in str(e.value)


def test_an_unknown_key_suggests_the_closest_one() -> None:
    doc = parse_text("tensor_parallel: 2\n", "f.yaml")
    with pytest.raises(ConfigError) as e:
        Reader(doc).reject_unknown(("tensor_parallel_size", "pipeline", "dp"))
    assert str(e.value) == "f.yaml:1: tensor_parallel: unknown key (did you mean 'tensor_parallel_size'?)"


@pytest.mark.parametrize("value", [True, None, [1]])
def test_a_fraction_must_be_a_number(value: object) -> None:
    doc = parse_json(json.dumps({"f": value, "g": 0.5}), "c.json")
    assert Reader(doc).get_fraction("g") == 0.5
    if value is None:
        assert Reader(doc).get_fraction("f", default=0.9) == 0.9  # null reads as unset
        return
    with pytest.raises(ConfigError, match="expected a fraction between 0 and 1"):
        Reader(doc).get_fraction("f")


@pytest.mark.parametrize("value", [5, "  ", ""])
def test_a_string_must_be_a_non_empty_string(value: object) -> None:
    doc = parse_json(json.dumps({"s": value}), "c.json")
    with pytest.raises(ConfigError, match="expected a non-empty string"):
        Reader(doc).get_str("s")


@pytest.mark.parametrize(("value", "read"), [(0, False), (1, True), ("on", True), ("No", False)])
def test_a_boolean_reads_0_1_and_the_yaml_words(value: object, read: bool) -> None:
    # a YAML document (not strict JSON, where a string is never a boolean): "on" quoted stays a string here
    assert Reader(parse_text(json.dumps({"b": value}), "f.yaml")).get_bool("b") is read


@pytest.mark.parametrize("value", [2, -1, "maybe", 0.5])
def test_other_booleans_are_refused(value: object) -> None:
    with pytest.raises(ConfigError, match="expected true or false"):
        Reader(parse_text(json.dumps({"b": value}), "f.yaml")).get_bool("b")


def test_a_yaml_syntax_error_names_its_line_one_based() -> None:
    # PyYAML's problem_mark.line counts from 0: "b: c: d" on the second line is line 2 to an editor
    e = _error("a: 1\nb: c: d\n")
    assert (e.line, e.detail) == (2, "not valid YAML/JSON: mapping values are not allowed in this context")


def test_closed_containers_give_their_level_back_one_each() -> None:
    # ten empty lists open and close a level each (back to depth 1); then 64 more levels make 65 > 64, refused by
    # the scan on line 2, where the 65th '[' is
    e = _error("[\n" + "[], " * 10 + "[" * 64 + "1" + "]" * 64 + "]\n")
    assert (e.line, e.detail) == (2, "nested deeper than kvplan's limit of 64 levels")


def test_the_101st_alias_is_refused_on_its_own_line() -> None:
    # MAX_YAML_ALIASES 100: an anchor on line 1, "b:" on line 2, aliases on lines 3-103; the 101st is on line 103
    e = _error("a: &a 1\nb:\n" + "  - *a\n" * 101)
    assert (e.line, e.detail) == (103, "more than 100 YAML aliases (*name): past kvplan's limit")
    assert len(parse_text("a: &a 1\nb:\n" + "  - *a\n" * 100, "f.yaml").data["b"]) == 100


def test_a_message_of_400_characters_is_kept_whole_and_401_is_cut(tmp_path: Path) -> None:
    # "config file " (12) + the path + ": no such file" (14): a missing path of 374 characters says 400 whole
    def missing(length: int) -> Path:
        short = length - len(str(tmp_path)) - len("/c.yaml")
        parts = [("d" * 200 + "/") for _ in range(short // 201)]
        rest = short - 201 * len(parts)
        return Path(str(tmp_path) + "/" + "".join(parts) + "e" * (rest - 1) + "/c.yaml")

    whole = missing(374)
    with pytest.raises(InputError) as e:
        read_file(whole)
    assert (len(str(e.value)), str(e.value)) == (400, f"config file {whole}: no such file")
    cut = missing(375)
    with pytest.raises(InputError) as e:
        read_file(cut)
    assert str(e.value) == f"config file {str(cut)[:80]}…: no such file"


def test_exactly_100000_values_are_read_and_one_more_refused() -> None:
    # MAX_YAML_NODES 100,000: a flow list of 99,999 scalars is 1 + 99,999 = 100,000 values (under the scan's
    # 2 × 100,000 events); 100,000 scalars are 100,001, refused where the list is (line 1)
    assert len(parse_text("[" + "0," * 99_999 + "]", "f.yaml").data) == 99_999
    e = _error("[" + "0," * 100_000 + "]")
    assert (e.line, e.detail) == (1, "expands to more than 100,000 values (YAML aliases?): past kvplan's limit")


def test_a_parser_error_says_its_problem_not_its_context() -> None:
    # an unclosed flow list: PyYAML's MarkedYAMLError has context "while parsing a flow sequence" (str(e)'s first
    # line) and problem "did not find expected ',' or ']'", found where the text ends (line 3)
    e = _error("a: 1\nb: [1, 2\n")
    assert (e.line, e.detail) == (3, "not valid YAML/JSON: did not find expected ',' or ']'")


def test_key_errors_and_value_errors_are_located_on_their_lines() -> None:
    # a complex key (a flow list as a key, "? [x]") on line 2; a duplicate key a on line 3; a value YAML cannot
    # construct (!!int x: int('x')) on line 2, said in one line
    e = _error("a: 1\n? [x]\n: 2\n")
    assert (e.line, e.detail) == (2, "mapping keys must be plain names")
    e = _error("a: 1\nb: 2\na: 3\n")
    assert (e.line, e.key, e.detail) == (3, "a", "duplicate key")
    e = _error("a: 1\nb: !!int x\n")
    assert (e.line, e.key, e.detail) == (2, "b", "cannot read a value: invalid literal for int() with base 10: 'x'")


def test_a_token_count_of_zero_is_refused() -> None:
    # a context or token length of 0 is no length at all; 1 is the least
    doc = parse_text("n: 0\nm: 1\n", "f.yaml")
    with pytest.raises(ConfigError) as e:
        Reader(doc).get_tokens("n")
    assert str(e.value) == "f.yaml:1: n: expected a positive token count, got 0"
    assert Reader(doc).get_tokens("m") == 1


def test_a_missing_key_under_a_nested_mapping_is_located_at_its_nearest_parent() -> None:
    # a key path with no line of its own takes its nearest parent's: ('a', 'b', 'c', 'x') is under c (line 3),
    # ('a', 'b', 'x') under b (line 2), one level up at a time
    doc = parse_text("a:\n  b:\n    c: 1\n", "f.yaml")
    assert (doc.line(("a", "b", "c", "x")), doc.line(("a", "b", "x")), doc.line(("z",))) == (3, 2, 1)


def test_json_with_a_30_digit_integer_before_a_31_digit_one_names_the_long_ones_line() -> None:
    # 30 digits is kvplan's limit (MAX_INT_DIGITS) and reads; the 31-digit integer on line 4 is the one refused
    with pytest.raises(ConfigError) as e:
        parse_json('{\n "a": ' + "1" * 30 + ',\n "b": ' + "2" * 29 + ',\n "n": ' + "1" * 31 + "\n}", "c.json")
    assert e.value.line == 4 and "digits" in str(e.value)


@pytest.mark.parametrize(("value", "ok"), [(1, True), (1.0, True), (1.001, False), (1.5, False), (0, False)])
def test_a_fraction_lies_in_0_exclusive_to_1_inclusive(value: float, ok: bool) -> None:
    # vLLM's CacheConfig.gpu_memory_utilization: Field(gt=0, le=1); kvplan reads every fraction knob so
    doc = parse_json(json.dumps({"f": value}), "c.json")
    if ok:
        assert Reader(doc).get_fraction("f") == value
    else:
        with pytest.raises(ConfigError, match=r"expected a fraction in \(0, 1\]"):
            Reader(doc).get_fraction("f")
