"""RFC 8785 digests: key order and number spelling do not matter, unrepresentable
numbers give no digest at all."""

import hashlib

from app.kit.canonical import canonical_sha256


def test_key_order_and_number_spelling_do_not_change_the_digest():
    left = canonical_sha256({"b": 1, "a": [1.0, "x"]})
    assert left == canonical_sha256({"a": [1, "x"], "b": 1.0})


def test_digest_is_sha256_of_the_canonical_bytes():
    assert canonical_sha256({"z": None, "a": "é"}) == hashlib.sha256(
        '{"a":"é","z":null}'.encode()).hexdigest()


def test_different_values_differ():
    assert canonical_sha256({"path": "a"}) != canonical_sha256({"path": "b"})


def test_integers_beyond_2_53_have_no_digest():
    assert canonical_sha256({"n": 2**60}) is None
    assert canonical_sha256({"n": 2**53 - 1}) is not None
