"""The C2SP signed-note format (https://c2sp.org/signed-note), as Go's
golang.org/x/mod/sumdb/note and the transparency-dev tools read and write it. Pure: no
I/O; Ed25519 is `cryptography`'s.

A note is UTF-8 text ending in a newline, then a blank line, then signature lines
`— <name> <base64(4-byte key hash ‖ signature)>`. The key hash is the first 4 bytes
(big-endian) of SHA-256(name ‖ 0x0A ‖ 0x01 ‖ public key); 0x01 names Ed25519. A verifier
key is `<name>+<hex key hash>+<base64(0x01 ‖ public key)>`; a signer key
`PRIVATE+KEY+<name>+<hex key hash>+<base64(0x01 ‖ seed)>`, which is also the file
`toolgate keys signing-key new` writes (Go's note.NewSigner reads it)."""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

ED25519 = 1
_DASH = "\u2014 "  # em dash, space: how every signature line begins
_MAX_SIGNATURES = 100  # as Go's note.Open


class NoteError(ValueError):
    """A malformed note or key, or a signature that does not hold."""


def valid_name(name: str) -> bool:
    """Non-empty, no Unicode spaces, no '+' (the format's only rules for a name)."""
    return bool(name) and "+" not in name and not any(c.isspace() for c in name)


def key_hash(name: str, key: bytes) -> int:
    """`key` is the algorithm byte and the public key."""
    return int.from_bytes(hashlib.sha256(name.encode() + b"\n" + key).digest()[:4], "big")


def _b64(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise NoteError("not base64") from None


def _raw_public(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(Encoding.Raw, PublicFormat.Raw)


@dataclass(frozen=True)
class Verifier:
    name: str
    hash: int
    public_key: Ed25519PublicKey

    @classmethod
    def parse(cls, vkey: str) -> Verifier:
        """From a verifier key `<name>+<hash>+<base64>`; NoteError if malformed."""
        parts = vkey.strip().split("+", 2)  # base64 may hold "+"
        if len(parts) != 3 or len(parts[1]) != 8 or not valid_name(parts[0]):
            raise NoteError("not a verifier key (<name>+<hash>+<base64 key>)")
        name, hex_hash, data = parts
        try:
            wanted = int(hex_hash, 16)
        except ValueError:
            raise NoteError("the verifier key's hash is not hexadecimal") from None
        key = _b64(data)
        if len(key) != 33 or key[0] != ED25519:
            raise NoteError("the verifier key is not an Ed25519 key")
        if key_hash(name, key) != wanted:
            raise NoteError("the verifier key's hash does not match its name and key")
        return cls(name, wanted, Ed25519PublicKey.from_public_bytes(key[1:]))

    def key(self) -> str:
        """The verifier key text."""
        data = base64.b64encode(bytes([ED25519]) + _raw_public(self.public_key)).decode()
        return f"{self.name}+{self.hash:08x}+{data}"

    def verify(self, text: bytes, signature: bytes) -> bool:
        try:
            self.public_key.verify(signature, text)
        except InvalidSignature:
            return False
        return True


@dataclass(frozen=True)
class Signer:
    name: str
    hash: int
    private_key: Ed25519PrivateKey

    @classmethod
    def generate(cls, name: str) -> Signer:
        if not valid_name(name):
            raise NoteError(f"not a key name (no spaces, no '+'): {name!r}")
        private = Ed25519PrivateKey.generate()
        return cls(name, key_hash(name, bytes([ED25519]) + _raw_public(private.public_key())),
                   private)

    @classmethod
    def parse(cls, skey: str) -> Signer:
        """From `PRIVATE+KEY+<name>+<hash>+<base64(0x01 ‖ seed)>`; NoteError if malformed."""
        parts = skey.strip().split("+", 4)  # base64 may hold "+"
        if len(parts) != 5 or parts[:2] != ["PRIVATE", "KEY"] or len(parts[3]) != 8 \
                or not valid_name(parts[2]):
            raise NoteError("not a signer key (PRIVATE+KEY+<name>+<hash>+<base64 key>)")
        name, hex_hash, data = parts[2:]
        key = _b64(data)
        if len(key) != 33 or key[0] != ED25519:
            raise NoteError("the signer key is not an Ed25519 key")
        private = Ed25519PrivateKey.from_private_bytes(key[1:])
        try:
            wanted = int(hex_hash, 16)
        except ValueError:
            raise NoteError("the signer key's hash is not hexadecimal") from None
        if key_hash(name, bytes([ED25519]) + _raw_public(private.public_key())) != wanted:
            raise NoteError("the signer key's hash does not match its name and key")
        return cls(name, wanted, private)

    def key(self) -> str:
        """The signer key text (secret)."""
        from cryptography.hazmat.primitives.serialization import NoEncryption, PrivateFormat

        seed = self.private_key.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
        data = base64.b64encode(bytes([ED25519]) + seed).decode()
        return f"PRIVATE+KEY+{self.name}+{self.hash:08x}+{data}"

    def verifier(self) -> Verifier:
        return Verifier(self.name, self.hash, self.private_key.public_key())


def _check_text(text: str) -> None:
    if not text.endswith("\n"):
        raise NoteError("a note's text ends with a newline")
    if any(ord(c) < 0x20 and c != "\n" for c in text):
        raise NoteError("a note holds no control characters but newlines")


def sign(text: str, *signers: Signer) -> str:
    """The signed note: `text` (ending in a newline), a blank line, one line per signer."""
    _check_text(text)
    if "\n\n" in text:  # a later blank line would be taken for the signatures' separator
        raise NoteError("a note's text has no blank line")
    body = text.encode()
    lines = []
    for signer in signers:
        signature = signer.hash.to_bytes(4, "big") + signer.private_key.sign(body)
        lines.append(f"{_DASH}{signer.name} {base64.b64encode(signature).decode()}\n")
    return text + "\n" + "".join(lines)


@dataclass(frozen=True)
class Signature:
    name: str
    hash: int
    base64: str


@dataclass(frozen=True)
class Note:
    text: str
    signatures: tuple[Signature, ...]  # verified
    unverified: tuple[Signature, ...]  # by keys not given


def open_note(message: str | bytes, verifiers: list[Verifier]) -> Note:
    """Parse a signed note and verify its signatures by the known keys, as Go's note.Open:
    NoteError if it is malformed, if a signature by a known key does not hold, or if none
    is by a known key."""
    if isinstance(message, bytes):
        try:
            message = message.decode()
        except UnicodeDecodeError:
            raise NoteError("a note is UTF-8") from None
    if any(ord(c) < 0x20 and c != "\n" for c in message):
        raise NoteError("malformed note: control characters")
    split = message.rfind("\n\n")
    if split < 0:
        raise NoteError("malformed note: no blank line before the signatures")
    text, block = message[:split + 1], message[split + 2:]
    if not block or not block.endswith("\n"):
        raise NoteError("malformed note: no signature lines")
    known = {(v.name, v.hash): v for v in verifiers}
    good: list[Signature] = []
    other: list[Signature] = []
    lines = block[:-1].split("\n")
    if len(lines) > _MAX_SIGNATURES:
        raise NoteError("malformed note: too many signatures")
    for line in lines:
        if not line.startswith(_DASH):
            raise NoteError("malformed note: a signature line begins with '— '")
        name, _, encoded = line[len(_DASH):].partition(" ")
        raw = _b64(encoded) if encoded else b""
        if not valid_name(name) or len(raw) < 5:
            raise NoteError("malformed note: a signature line is not '— <name> <base64>'")
        signature = Signature(name, int.from_bytes(raw[:4], "big"), encoded)
        verifier = known.get((name, signature.hash))
        if verifier is None:
            if signature not in other:
                other.append(signature)
            continue
        if signature in good:
            continue
        if not verifier.verify(text.encode(), raw[4:]):
            raise NoteError(f"invalid signature for key {name}+{signature.hash:08x}")
        good.append(signature)
    if not good:
        raise NoteError("the note has no signature by a known key")
    return Note(text, tuple(good), tuple(other))
