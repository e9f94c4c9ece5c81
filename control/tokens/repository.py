"""Token queries: a presented token found under either hash scheme."""

from __future__ import annotations

from sqlalchemy import and_, or_, select, update
from sqlalchemy.orm import Session

from control.tokens.hashing import HMAC_SHA256, LEGACY_SHA256, hash_token, legacy_hash
from control.tokens.models import AdminToken


def find(session: Session, pepper: str, secret: str) -> AdminToken | None:
    """The token row `secret` belongs to, revoked or not, whichever scheme it is stored under.
    A scheme is matched with its own digest only: a SHA-256 digest presented as a token is not
    a way in."""
    t = AdminToken
    stmt = select(t).where(
        or_(
            and_(t.token_hash == hash_token(pepper, secret), t.hash_scheme == HMAC_SHA256),
            and_(t.token_hash == legacy_hash(secret), t.hash_scheme == LEGACY_SHA256),
        )
    )
    return session.scalars(stmt).first()


def upgrade_hash(session: Session, token_id: str, pepper: str, secret: str) -> None:
    """Rewrite a SHA-256 row as HMAC (a no-op if another request already did)."""
    session.execute(
        update(AdminToken)
        .where(AdminToken.id == token_id, AdminToken.hash_scheme == LEGACY_SHA256)
        .values(token_hash=hash_token(pepper, secret), hash_scheme=HMAC_SHA256)
    )
