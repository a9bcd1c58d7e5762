"""The one bounded JSON reader (``lmckv.base.untrusted_json``): every limit of ``JSONLimits``
refuses with ``UntrustedJSONError`` naming it, fast and without a ``RecursionError``; files are
read only up to the size limit and only if regular; valid documents parse as ``json.loads``
parses them."""

from __future__ import annotations

import json
import math
import os
import pickle
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lmckv.base.untrusted_json import (
    DEFAULT_LIMITS,
    JSONLimits,
    UntrustedJSONError,
    iter_lines,
    load_path,
    loads,
)

DEEP = 100_000


def refused(data: str | bytes, limits: JSONLimits = DEFAULT_LIMITS) -> UntrustedJSONError:
    with pytest.raises(UntrustedJSONError) as info:
        loads(data, limits, what="test input")
    assert str(info.value).startswith("test input: ")
    assert info.value.what == "test input"
    return info.value


@pytest.mark.parametrize("as_bytes", [False, True], ids=["str", "bytes"])
@pytest.mark.parametrize(
    "document",
    [
        "[" * DEEP + "]" * DEEP,
        '{"a":' * DEEP + "1" + "}" * DEEP,
        "[" * DEEP,  # unclosed as well
        '[{"k":' * (DEEP // 2) + "0" + "}]" * (DEEP // 2),
    ],
    ids=["arrays", "objects", "unclosed", "mixed"],
)
def test_refuses_deep_nesting_fast(document: str, as_bytes: bool) -> None:
    start = time.perf_counter()
    error = refused(document.encode() if as_bytes else document)
    assert time.perf_counter() - start < 0.5
    assert error.limit == "max_depth"
    assert "max_depth=64" in str(error)


def test_refuses_one_level_past_max_depth() -> None:
    assert loads("[" * 64 + "]" * 64) == json.loads("[" * 64 + "]" * 64)
    assert refused("[" * 65 + "]" * 65).limit == "max_depth"
    assert refused("[" * 1 + "]", JSONLimits(max_depth=0)).limit == "max_depth"
    assert loads("7", JSONLimits(max_depth=0)) == 7


@pytest.mark.parametrize(
    "literal",
    ["1" * 5000, "-" + "9" * 5000, "1." + "0" * 5000, "1e" + "9" * 5000, "0." + "1" * 4999 + "e5"],
    ids=["int", "negative", "float", "exponent", "fraction-exponent"],
)
def test_refuses_long_number_literals(literal: str) -> None:
    assert refused(literal).limit == "max_number_chars"
    assert refused(f'{{"a": [1, {literal}]}}').limit == "max_number_chars"
    assert refused(f"[{literal}]".encode()).limit == "max_number_chars"


def test_refuses_number_one_char_past_the_limit() -> None:
    assert loads("1" * 100) == int("1" * 100)
    assert loads("-" + "1" * 99) == -int("1" * 99)
    assert refused("-" + "1" * 100).limit == "max_number_chars"
    assert refused("[1.5e10]", JSONLimits(max_number_chars=5)).limit == "max_number_chars"
    # The literals true/false/null and strings are not numbers.
    assert loads('[true, false, null, "123456"]', JSONLimits(max_number_chars=3))


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_refuses_nan_and_infinity_unless_allowed(literal: str) -> None:
    assert refused(literal).limit == "allow_nan"
    assert refused(f"[1, {literal}]").limit == "allow_nan"
    value = loads(f"[{literal}]", JSONLimits(allow_nan=True))[0]
    assert math.isnan(value) if literal == "NaN" else value == float(literal)
    # allowed even where max_number_chars is shorter than the literal
    assert len(loads(f"[{literal}]", JSONLimits(allow_nan=True, max_number_chars=2))) == 1


def test_refuses_too_many_items() -> None:
    limits = JSONLimits(max_items=4)
    assert loads("[1, 2, 3, 4]", limits) == [1, 2, 3, 4]
    assert loads('{"a": 1, "b": [2, 3]}', limits)  # 2 members + 2 elements
    assert refused('{"a": 1, "b": [2, 3], "c": {}}', limits).limit == "max_items"
    assert loads("[[], [], {}, [ ]]", limits)
    assert loads('["a,b,c,d,e,f"]', limits)  # commas inside strings are no items
    assert refused("[1, 2, 3, 4, 5]", limits).limit == "max_items"
    assert refused('{"a": 1, "b": 2, "c": 3, "d": 4, "e": 5}', limits).limit == "max_items"
    assert refused("[[1], [2], [3]]", limits).limit == "max_items"  # 3 + 1 + 1 + 1
    assert loads("[[[[[]]]]]", limits)  # 5 arrays, 4 of them holding one item
    assert refused("[[[[[[]]]]]]", limits).limit == "max_items"
    many = "[" + ",".join(["0"] * 1_000_001) + "]"
    assert refused(many).limit == "max_items"


def test_refuses_long_string() -> None:
    limits = JSONLimits(max_string_chars=5)
    assert loads('["abcde", {"abcde": "é"}]', limits) == ["abcde", {"abcde": "é"}]
    assert refused('["abcdef"]', limits).limit == "max_string_chars"
    assert refused('{"abcdef": 1}', limits).limit == "max_string_chars"
    # counted as written: an escape is its characters, not what it stands for
    assert refused('["\\u00e9\\u00e9"]', limits).limit == "max_string_chars"
    assert refused(json.dumps("x" * ((1 << 20) + 1))).limit == "max_string_chars"


def test_refuses_over_max_bytes() -> None:
    limits = JSONLimits(max_bytes=10)
    assert loads("[1,2,3,45]", limits) == [1, 2, 3, 45]
    assert loads(b"[1,2,3,45]", limits) == [1, 2, 3, 45]
    assert refused("[1,2,3,456]", limits).limit == "max_bytes"
    assert refused(b"[1,2,3,456]", limits).limit == "max_bytes"
    assert refused(' "ééééé"', limits).limit == "max_bytes"  # 8 characters, 13 UTF-8 bytes
    assert refused(b" " * ((16 << 20) + 1)).limit == "max_bytes"


def test_load_path_refuses_big_sparse_file_fast(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    with big.open("wb") as f:
        f.truncate(1 << 30)
    start = time.perf_counter()
    with pytest.raises(UntrustedJSONError) as info:
        load_path(big)
    assert time.perf_counter() - start < 0.5
    assert info.value.limit == "max_bytes"
    assert str(big) in str(info.value)


def test_load_path_refuses_past_max_bytes_and_keeps_os_errors(tmp_path: Path) -> None:
    path = tmp_path / "doc.json"
    path.write_text('{"a": [1, 2]}')
    assert load_path(path) == {"a": [1, 2]}
    assert load_path(path, JSONLimits(max_bytes=13)) == {"a": [1, 2]}
    with pytest.raises(UntrustedJSONError) as info:
        load_path(path, JSONLimits(max_bytes=12), what="results file")
    assert info.value.limit == "max_bytes"
    assert str(info.value).startswith("results file: ")
    with pytest.raises(FileNotFoundError):
        load_path(tmp_path / "missing.json")


def test_load_path_refuses_fifo_and_devices_without_hanging(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    outcome: list[BaseException | None] = []

    def read() -> None:
        try:
            load_path(fifo)
            outcome.append(None)
        except BaseException as e:
            outcome.append(e)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout=5)
    if reader.is_alive():  # unblock the reader before failing, so the thread ends
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail("load_path blocked on a FIFO")
    assert len(outcome) == 1
    assert isinstance(outcome[0], UntrustedJSONError)
    assert "not a regular file" in str(outcome[0])
    with pytest.raises(UntrustedJSONError, match="not a regular file"):
        load_path(Path("/dev/zero"))
    with pytest.raises(UntrustedJSONError, match="not a regular file"):
        list(iter_lines(fifo))
    with pytest.raises(UntrustedJSONError, match="not a regular file"):
        load_path(tmp_path)


@pytest.mark.parametrize(
    "data", [b'"\xff"', b'["\xc3"]', b'"\xed\xa0\x80"', b"\xef\xbb\xbf{}", b'{"a": "\xe9"}']
)
def test_refuses_invalid_utf8(data: bytes) -> None:
    error = refused(data)
    assert error.limit is None
    assert "UTF-8" in str(error) or "BOM" in str(error)


def test_accepts_lone_surrogate_escapes() -> None:
    # valid JSON (RFC 8259 §8.2): kept as lone code points, as json.loads keeps them
    assert loads('["\\ud800", "\\udfff"]') == ["\ud800", "\udfff"]
    assert loads(b'"\\ud83d\\ude00"') == "\U0001f600"


@pytest.mark.parametrize(
    "document",
    ["", "   ", "[1,", '{"a" 1}', "tru", "[1] x", "[1,]", "{'a': 1}", '"a\nb"', '"\\q"', "01"],
)
def test_refuses_malformed_json(document: str) -> None:
    error = refused(document)
    assert error.limit is None
    assert "malformed JSON" in str(error)


def test_refusal_carries_only_a_short_escaped_excerpt() -> None:
    secret = "SECRET" * 10_000
    error = refused(f'["{secret}" oops "{secret}"]')
    assert len(str(error)) < 300
    assert "SECRET" * 4 not in str(error)
    error = refused('["\x1b[31m\u202e" oops]')
    assert "\x1b" not in str(error) and "\u202e" not in str(error)


def test_brackets_and_quotes_inside_strings_do_not_count() -> None:
    limits = JSONLimits(max_depth=2, max_items=3)
    document = '{"[[[{{{": ["]]]}}}", "\'[[[[,,,,"]}'
    assert loads(document, limits) == json.loads(document)
    nested = json.dumps(["[" * 1000 + "{" * 1000])
    assert loads(nested, limits) == json.loads(nested)
    assert loads(json.dumps("]" * 70 + "[" * 70)) == "]" * 70 + "[" * 70


def test_escaped_quotes_and_backslashes() -> None:
    limits = JSONLimits(max_depth=1)
    for value in ['a"[[[', '\\"[[', "\\", '\\\\"[{', '"', "x\\\\", "\\[\\{\\"]:
        document = json.dumps([value, value])
        assert loads(document, limits) == [value, value]
    assert refused('["\\\\"[[]]', limits).limit == "max_depth"  # the string ends at \\"


@given(st.lists(st.text(alphabet='\\"[]{},:x\u00e9 ', max_size=12), max_size=4))
def test_strings_of_brackets_quotes_and_backslashes_are_measured_as_written(
    values: list[str],
) -> None:
    document = json.dumps(values)
    limits = JSONLimits(max_depth=1, max_items=4, max_string_chars=8)
    if any(len(json.dumps(value)) - 2 > 8 for value in values):
        assert refused(document, limits).limit == "max_string_chars"
    else:
        assert loads(document, limits) == values


@pytest.mark.parametrize(
    "document",
    ['"' + '\\"' * 200_000, '"' * 1_000_001, '["ab",' * 200_000, '"' + "\\" * 300_000],
    ids=["unterminated-escapes", "quotes", "short-strings", "backslashes"],
)
def test_refuses_adversarial_quoting_fast(document: str) -> None:
    start = time.perf_counter()
    refused(document)
    assert time.perf_counter() - start < 0.5


def test_iter_lines_reports_the_line_number(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(b'{"a": 1}\n\n  \r\n[2, 3]\r\n"four"\n[[[' + b"[" * 100 + b"\n5\n")
    lines = iter_lines(path, what="results log")
    assert next(lines) == (1, {"a": 1})
    assert next(lines) == (4, [2, 3])
    assert next(lines) == (5, "four")
    with pytest.raises(UntrustedJSONError) as info:
        next(lines)
    assert str(info.value).startswith("results log line 6: ")
    assert info.value.limit == "max_depth"
    path.write_bytes(b"1\n{oops}\n")
    with pytest.raises(UntrustedJSONError, match=r"log.jsonl line 2: malformed JSON"):
        list(iter_lines(path))
    path.write_bytes(b"1\n" + b" " * 11 + b"2\n")
    with pytest.raises(UntrustedJSONError, match="line 2") as info:
        list(iter_lines(path, JSONLimits(max_bytes=11)))
    assert info.value.limit == "max_bytes"
    assert list(iter_lines(path, JSONLimits(max_bytes=12))) == [(1, 1), (2, 2)]
    path.write_bytes(b"1\n\n\n2")
    assert list(iter_lines(path, max_lines=4)) == [(1, 1), (4, 2)]
    with pytest.raises(UntrustedJSONError, match="line 4") as info:
        list(iter_lines(path, max_lines=3))
    assert info.value.limit == "max_lines"


REPRESENTATIVE = [
    "null",
    "true",
    "0",
    "-0.0",
    "1.5e-300",
    '"caf\\u00e9 \\ud83d\\ude00 \\n\\t\\\\"',
    "[]",
    "{}",
    ' { "a" : [ 1 , 2.5 , { "b" : null } ] , "c" : "d" } ',
    json.dumps({"run": {"rows": [{"x": i, "y": i / 3, "k": f"k{i}"} for i in range(200)]}}),
    "[" * 64 + "]" * 64,
    json.dumps("é€𝄞"),
]


@pytest.mark.parametrize("document", REPRESENTATIVE)
def test_valid_documents_parse_as_json_loads_does(document: str) -> None:
    expected = json.loads(document)
    assert loads(document) == expected
    assert loads(document.encode()) == expected


def test_error_is_a_value_error_that_pickles() -> None:
    error = refused("[" * 100)
    assert isinstance(error, ValueError)
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.limit, copy.what, str(copy)) == (error.limit, error.what, str(error))


json_values: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**40), max_value=10**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=6) | st.dictionaries(st.text(), children, max_size=6)
    ),
    max_leaves=40,
)


@given(json_values)
def test_round_trips_any_value_within_the_limits(value: Any) -> None:
    assert loads(json.dumps(value)) == value
    assert loads(json.dumps(value, ensure_ascii=False).encode()) == value
