"""How admin tokens are stored: HMAC-SHA256 under the pepper, the secret tenant keys are hashed
under too. A token an operator chose (`secrets.admin_token`) may be guessable; without the pepper
its stored hash cannot be tested offline.

Releases before revision 0006 stored plain SHA-256 (`sha256`); such a row keeps working and is
rewritten as HMAC the first time its token authenticates (`control/api/access/identify.py`) or, for
the configured bootstrap token, at start (`control/process/bootstrap.py`)."""

from __future__ import annotations

import hashlib
import hmac

HMAC_SHA256 = "hmac-sha256"
LEGACY_SHA256 = "sha256"
# Keeps a token's hash apart from a tenant key's under the same pepper.
_DOMAIN = b"sluicegate admin token\x00"


def hash_token(pepper: str, token: str) -> str:
    return hmac.new(pepper.encode(), _DOMAIN + token.encode(), hashlib.sha256).hexdigest()


def legacy_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()
