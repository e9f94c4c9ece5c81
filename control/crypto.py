"""Upstream credentials at rest: Fernet (AES-128-CBC + HMAC-SHA256) under keys from the
environment, never from the database. Several keys may be given (comma-separated): the first
encrypts, all decrypt, so a key can be rotated without downtime.

Reads never return a credential: only `mask()` and `fingerprint()`.
"""

from __future__ import annotations

import hashlib

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

_CHECK_PLAINTEXT = b"sluicegate encryption key check"


class CredentialCipher:
    def __init__(self, keys: str) -> None:
        parts = [part.strip() for part in keys.split(",") if part.strip()]
        if not parts:
            raise ValueError("no encryption key given")
        fernets = []
        for index, part in enumerate(parts):
            try:
                fernets.append(Fernet(part.encode()))
            except (ValueError, TypeError):
                # The value itself is never repeated in the message.
                raise ValueError(
                    f"encryption key #{index + 1} is not a Fernet key (32 url-safe base64 bytes; "
                    "make one with `python -c 'from cryptography.fernet import Fernet; "
                    "print(Fernet.generate_key().decode())'`)"
                ) from None
        self._fernet = MultiFernet(fernets)

    @staticmethod
    def generate_key() -> str:
        return Fernet.generate_key().decode()

    def encrypt(self, plaintext: str) -> str:
        return self._fernet.encrypt(plaintext.encode()).decode()

    def decrypt(self, token: str) -> str:
        try:
            return self._fernet.decrypt(token.encode()).decode()
        except InvalidToken:
            raise ValueError(
                "a stored credential cannot be decrypted with the configured keys"
            ) from None

    def rotate(self, token: str) -> str:
        """The same plaintext, encrypted under the first key."""
        try:
            return self._fernet.rotate(token.encode()).decode()
        except InvalidToken:
            raise ValueError(
                "a stored credential cannot be decrypted with the configured keys"
            ) from None

    def check_token(self) -> str:
        """A ciphertext stored at first start; decrypting it later proves the key is the same."""
        return self._fernet.encrypt(_CHECK_PLAINTEXT).decode()

    def verifies(self, check: str) -> bool:
        try:
            return self._fernet.decrypt(check.encode()) == _CHECK_PLAINTEXT
        except InvalidToken:
            return False


def fingerprint(secret: str) -> str:
    """First 12 hex characters of SHA-256: tells two credentials apart, reveals nothing usable."""
    return hashlib.sha256(secret.encode()).hexdigest()[:12]


def mask(secret: str) -> str:
    """`sk-…abcd` for long secrets; shorter ones show less, very short ones nothing."""
    if len(secret) >= 16:
        return f"{secret[:3]}…{secret[-4:]}"
    if len(secret) >= 8:
        return f"…{secret[-2:]}"
    return "…"
