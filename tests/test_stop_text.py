"""``stop`` strings over HTTP: the text a stream releases never holds one and joins to the
cut answer, however the text arrives."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cad_outlines.server.protocol import APIError, StopText, parse_chat_request

ALPHABET = "ab\n"


@settings(max_examples=400, deadline=None)
@given(stops=st.lists(st.text(ALPHABET, min_size=1, max_size=3), max_size=3, unique=True).map(tuple),
       text=st.text(ALPHABET + "c", max_size=40), cuts=st.lists(st.integers(1, 5), max_size=40))
def test_released_pieces_join_to_the_cut_text_and_never_show_a_stop(stops, text, cuts):
    scan, out, end = StopText(stops), "", 0
    for step in cuts:
        end = min(len(text), end + step)
        out += scan.release(text[:end])
        assert not any(s in out for s in stops)
    out += scan.release(text, final=True)
    assert out == StopText(stops).cut(text)
    assert not any(s in out for s in stops)


def test_the_stop_met_first_is_the_one_that_ends_first():
    assert StopText(("abc", "b")).cut("xabcx") == "xa"  # "b" is complete before "abc"
    assert StopText(("bc", "abc")).cut("xabcx") == "x"  # both end at once: the longer one
    scan = StopText(("zz",))
    assert scan.cut("abc") == "abc" and not scan.hit


@pytest.mark.parametrize("stop, expected", [("a", ("a",)), (["a", "b", "a"], ("a", "b")), (None, ())])
def test_stop_is_a_string_or_a_list(stop, expected):
    body = {"model": "m", "messages": [{"role": "user", "content": "x"}], "stop": stop}
    assert parse_chat_request(body).stop == expected


@pytest.mark.parametrize("stop", [5, [""], ["a", 1], list("abcde"), {"a": 1}])
def test_a_bad_stop_is_a_400_naming_it(stop):
    body = {"model": "m", "messages": [{"role": "user", "content": "x"}], "stop": stop}
    with pytest.raises(APIError) as info:
        parse_chat_request(body)
    assert info.value.status == 400 and info.value.param == "stop"
