"""The signed-note format against the published example of Go's golang.org/x/mod/sumdb/note
(its package documentation and example_test.go, ExampleSign and ExampleOpen)."""

from __future__ import annotations

import base64

import pytest

from app.log.note import NoteError, Signer, Verifier, key_hash, open_note, sign

# Verbatim from golang.org/x/mod/sumdb/note (note.go's "Example" and example_test.go).
GO_SKEY = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
GO_VKEY = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
GO_TEXT = ("If you think cryptography is the answer to your problem,\n"
           "then you don't know what your problem is.\n")
GO_NOTE = (GO_TEXT + "\n"
           "\u2014 PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZS"
           "NXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n")


def test_the_published_example_note_verifies() -> None:
    verifier = Verifier.parse(GO_VKEY)
    assert (verifier.name, f"{verifier.hash:08x}") == ("PeterNeumann", "c74f20a3")
    note = open_note(GO_NOTE, [verifier])
    assert note.text == GO_TEXT
    assert [(s.name, s.hash) for s in note.signatures] == [("PeterNeumann", 0xc74f20a3)]
    assert verifier.key() == GO_VKEY


def test_signing_the_published_text_gives_the_published_note() -> None:
    signer = Signer.parse(GO_SKEY)  # Ed25519 signatures are deterministic
    assert sign(GO_TEXT, signer) == GO_NOTE
    assert signer.verifier().key() == GO_VKEY
    assert signer.key() == GO_SKEY


def test_a_changed_text_or_another_key_does_not_verify() -> None:
    verifier = Verifier.parse(GO_VKEY)
    with pytest.raises(NoteError, match="invalid signature"):
        open_note(GO_NOTE.replace("answer", "Answer"), [verifier])
    other = Signer.generate("PeterNeumann").verifier()
    with pytest.raises(NoteError, match="no signature by a known key"):
        open_note(GO_NOTE, [other])


def test_malformed_keys_and_notes_are_refused() -> None:
    for bad in ("", "PeterNeumann+c74f20a3", "Peter Neumann+c74f20a3+AA==",
                GO_VKEY.replace("c74f20a3", "c74f20a4"), GO_VKEY[:-4] + "AAAA"):
        with pytest.raises(NoteError):
            Verifier.parse(bad)
    verifier = Verifier.parse(GO_VKEY)
    for bad in (GO_TEXT, GO_NOTE.replace("\u2014 ", "- "), GO_NOTE.rstrip("\n"),
                GO_NOTE.replace("then", "\x07then")):
        with pytest.raises(NoteError):
            open_note(bad, [verifier])


def test_a_generated_key_round_trips() -> None:
    signer = Signer.generate("toolgate.example/log")
    again = Signer.parse(signer.key())
    assert again.verifier().key() == signer.verifier().key()
    pub = signer.verifier()
    raw = base64.b64decode(pub.key().split("+", 2)[2])
    assert pub.hash == key_hash(pub.name, raw)
    note = sign("a\nb\n", signer, Signer.generate("witness"))
    opened = open_note(note, [pub])
    assert opened.text == "a\nb\n" and [s.name for s in opened.unverified] == ["witness"]
