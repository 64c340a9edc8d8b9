"""Masking of secrets in log records: case-insensitive, whatever the keys' history."""

from __future__ import annotations

from app.log import records
from app.log.records import MASK, mask

KEYS = frozenset({"password", "api_key", "ab" * 40})


def test_listed_keys_are_masked_in_any_case_and_the_rest_kept_as_is():
    values = {"PassWord": "hunter2", "API_KEY": "k", "path": "a.py", "AB" * 40: "long"}
    assert mask(values, KEYS) == {"PassWord": MASK, "API_KEY": MASK, "path": "a.py",
                                  "AB" * 40: MASK}
    clean = {"path": "a.py", "Mode": "w"}
    assert mask(clean, KEYS) is clean  # nothing to mask: the same dict, no copy
    assert mask({}, KEYS) == {} and mask(values, frozenset()) is values


def test_remembered_lowercase_forms_stay_bounded_and_never_change_an_answer():
    for i in range(10_000):
        key = f"Key{i}"
        assert mask({key: 1, "PASSWORD": 2}, KEYS) == {key: 1, "PASSWORD": MASK}
    memo = records._lower.__self__
    assert 0 < len(memo) <= 4096
    assert mask({"x" * 100_000: 1}, KEYS) == {"x" * 100_000: 1}
    assert all(len(k) <= 64 for k in memo)
