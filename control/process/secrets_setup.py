"""The process's own secrets at start: the key pepper and the credential encryption key.

Each is checked against a value stored at first start, so a changed pepper (every key refused)
or a changed encryption key (credentials unreadable) stops the start with a clear message instead
of failing request by request. Neither secret is ever logged.
"""

from __future__ import annotations

import hmac
import logging
import os
import secrets
from pathlib import Path

from sluicegate import _core
from sqlalchemy import func, select
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

from control.api.errors import StartupError
from control.bridge.state import get_setting, put_setting
from control.crypto import CredentialCipher
from control.keys.models import ApiKey
from control.process.settings import Settings
from control.providers.models import Provider
from control.tokens.hashing import HMAC_SHA256
from control.tokens.models import AdminToken

log = logging.getLogger("sluicegate.control")

PEPPER = "key_pepper"
PEPPER_CHECK = "key_pepper_check"
ENCRYPTION_CHECK = "encryption_key_check"
_PEPPER_PROBE = "sluicegate:key-pepper-check"


def resolve_pepper(settings: Settings, sessions: sessionmaker[Session], embedded: bool) -> str:
    configured = settings.secrets.key_pepper
    with sessions() as session, session.begin():
        if configured is not None:
            pepper = configured.get_secret_value()
        else:
            stored = get_setting(session, PEPPER)
            if stored is not None:
                pepper = stored
            elif embedded:
                pepper = secrets.token_urlsafe(32)
                put_setting(session, PEPPER, pepper)
                log.info("generated a key pepper and kept it in the database (embedded mode)")
            else:
                raise StartupError(
                    "secrets.key_pepper (env SLUICEGATE_KEY_PEPPER) is required with PostgreSQL"
                )
        check = _core.hash_api_key(pepper, _PEPPER_PROBE)
        stored_check = get_setting(session, PEPPER_CHECK)
        changed = stored_check is not None and not hmac.compare_digest(stored_check, check)
        if changed and _hashed_under_pepper(session):
            raise StartupError(
                "the key pepper differs from the one the stored keys and admin tokens were "
                "hashed with: every one would be refused. Restore the previous secrets.key_pepper."
            )
        put_setting(session, PEPPER_CHECK, check)
    return pepper


def _hashed_under_pepper(session: Session) -> bool:
    """Keys, or live admin tokens, whose stored hash the pepper keys."""
    if session.scalar(select(func.count()).select_from(ApiKey)):
        return True
    tokens = select(func.count()).where(
        AdminToken.hash_scheme == HMAC_SHA256, AdminToken.revoked_at.is_(None)
    )
    return bool(session.scalar(tokens))


def default_key_file(settings: Settings) -> Path | None:
    url = make_url(settings.database.url)
    if url.get_backend_name() != "sqlite" or not url.database:
        return None
    return Path(url.database + ".key")


def _read_or_create_key_file(path: Path, may_create: bool) -> str:
    if path.exists():
        try:
            return path.read_text().strip()
        except OSError as e:
            raise StartupError(f"cannot read encryption key file {path}: {e.strerror}") from None
    if not may_create:
        raise StartupError(f"encryption key file {path} does not exist")
    key = CredentialCipher.generate_key()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(key + "\n")
    log.warning(
        "generated the credential encryption key in %s (embedded mode): back it up, stored "
        "credentials cannot be decrypted without it",
        path,
    )
    return key


def resolve_cipher(settings: Settings, sessions: sessionmaker[Session]) -> CredentialCipher:
    configured = settings.secrets.encryption_key
    if configured is not None:
        keys = configured.get_secret_value()
    else:
        path = settings.secrets.encryption_key_file
        default = default_key_file(settings)
        if path is None and default is None:
            raise StartupError(
                "secrets.encryption_key (env SLUICEGATE_ENCRYPTION_KEY) or "
                "secrets.encryption_key_file is required with PostgreSQL"
            )
        key_file = path if path is not None else default
        assert key_file is not None
        keys = _read_or_create_key_file(key_file, may_create=path is None)
    try:
        cipher = CredentialCipher(keys)
    except ValueError as e:
        raise StartupError(str(e)) from None
    with sessions() as session, session.begin():
        check = get_setting(session, ENCRYPTION_CHECK)
        if check is not None and not cipher.verifies(check):
            stored = select(func.count()).where(Provider.credential_ciphertext.is_not(None))
            if session.scalar(stored):
                raise StartupError(
                    "the encryption key cannot decrypt the stored credentials. Restore the "
                    "previous key, or list it after the new one (comma-separated) to rotate."
                )
        put_setting(session, ENCRYPTION_CHECK, cipher.check_token())
        # Re-encrypt under the first key, so that an older key can be dropped after one start.
        for provider in session.scalars(
            select(Provider).where(Provider.credential_ciphertext.is_not(None))
        ):
            assert provider.credential_ciphertext is not None
            try:
                provider.credential_ciphertext = cipher.rotate(provider.credential_ciphertext)
            except ValueError:
                raise StartupError(
                    f"the credential of provider {provider.id!r} cannot be decrypted with the "
                    "configured encryption keys"
                ) from None
    return cipher
