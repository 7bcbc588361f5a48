"""Bearer tokens of the HTTP API: created, listed and revoked by ``fleetdx token``, checked by the service.

A token reads ``fdx_<token_id>_<secret>``: ``token_id`` (12 hex characters) is public, shown by ``token list``
and used to revoke; ``secret`` is 32 random bytes from :mod:`secrets` (256 bits, URL-safe base64). Only the
SHA-256 digest of the whole token is stored (``api_tokens.sha256``, unique), so the database never holds a
usable token; the token itself is shown once, when created.

Why SHA-256 and not a password KDF (PBKDF2, scrypt): the secret is random with 256 bits of entropy, not a
memorised password. NIST SP 800-63B section 5.1.2.2 (look-up secret verifiers) asks that secrets of at least
112 bits be hashed with an approved one-way function, and keeps salting and key stretching for weaker
secrets: stretching a 256-bit random value gains nothing against guessing, and would cost every API request
the KDF's deliberate slowness (PBKDF2-HMAC-SHA256 at OWASP's 600,000 iterations: 0.40 s here, against
0.8 µs for one SHA-256; OWASP Password Storage Cheat Sheet). The digest is looked up through a unique
index, so no comparison loop leaks timing.

Scopes: ``read`` (the GET endpoints, when the service asks reads for a token) and ``write`` (every write,
and reads too). A revoked token keeps its row (``revoked_at`` set) so ``token list`` shows who had access.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import time
from enum import Enum

from sqlalchemy import select
from sqlalchemy.orm import Session

from fleetdx.orchestrator.store.errors import StoreError
from fleetdx.orchestrator.store.models import TokenRow
from fleetdx.orchestrator.store.store import Store
from fleetdx.probes.contracts import Contract

TOKEN_PREFIX = "fdx_"
#: the shape of a token: prefix, 12 hex characters of id, 43 URL-safe base64 characters of secret
TOKEN_RE = re.compile(r"^fdx_([0-9a-f]{12})_([A-Za-z0-9_-]{43})$")
TOKEN_ID_RE = re.compile(r"^[0-9a-f]{12}$")
NAME_MAX = 255


class TokenScope(str, Enum):
    """What a token may do."""

    READ = "read"  #: the GET endpoints, when the service asks reads for a token
    WRITE = "write"  #: every write (POST /reports), and reads


class TokenNotFound(StoreError):
    """No token has this token_id."""


class TokenInfo(Contract):
    """A token without its secret. Times are Unix seconds; ``revoked_at`` is None while the token is valid."""

    token_id: str
    name: str
    scope: TokenScope
    created_at: float
    revoked_at: float | None = None

    @property
    def active(self) -> bool:
        return self.revoked_at is None

    def allows(self, scope: TokenScope) -> bool:
        """Whether this (active) token may do what ``scope`` needs: write covers read."""
        return self.active and (self.scope is TokenScope.WRITE or scope is TokenScope.READ)


class NewToken(Contract):
    """A token just created: ``token`` is the bearer value, shown this once and stored nowhere."""

    token: str
    info: TokenInfo


def digest(token: str) -> str:
    """Hex SHA-256 of the token's UTF-8 bytes: what the store keeps."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _info(row: TokenRow) -> TokenInfo:
    return TokenInfo(
        token_id=row.token_id,
        name=row.name,
        scope=TokenScope(row.scope),
        created_at=row.created_at,
        revoked_at=row.revoked_at,
    )


def create_token(store: Store, name: str, scope: TokenScope, now: float | None = None) -> NewToken:
    """Make a token with ``scope``, named ``name`` (who or what uses it: 1-255 characters, no control
    character). Raises :class:`StoreError` for a bad name, and the store's errors for the database."""
    if not (1 <= len(name) <= NAME_MAX) or any(ord(ch) < 32 or ord(ch) == 127 for ch in name):
        raise StoreError(f"token name must be 1-{NAME_MAX} printable characters, got {name[:40]!r}")
    token_id = secrets.token_hex(6)
    token = f"{TOKEN_PREFIX}{token_id}_{secrets.token_urlsafe(32)}"
    row = TokenRow(
        token_id=token_id,
        name=name,
        scope=scope.value,
        sha256=digest(token),
        created_at=time.time() if now is None else now,
        revoked_at=None,
    )

    def work(session: Session) -> TokenInfo:
        session.add(row)
        session.flush()
        return _info(row)

    return NewToken(token=token, info=store._write(work))


def revoke_token(store: Store, token_id: str, now: float | None = None) -> TokenInfo:
    """Revoke the token ``token_id`` (from its next request on, in every worker). Revoking a revoked token
    keeps its first revocation time. Raises :class:`TokenNotFound`."""

    def work(session: Session) -> TokenInfo | None:
        row = session.scalar(select(TokenRow).where(TokenRow.token_id == token_id))
        if row is None:
            return None
        if row.revoked_at is None:
            row.revoked_at = time.time() if now is None else now
        session.flush()
        return _info(row)

    info = store._write(work) if TOKEN_ID_RE.match(token_id) else None
    if info is None:
        raise TokenNotFound(f"no token with id {token_id!r} (see `fleetdx token list`)")
    return info


def list_tokens(store: Store) -> list[TokenInfo]:
    """Every token, valid and revoked, oldest first."""
    with store._errors(), Session(store.engine) as session:
        rows = session.scalars(select(TokenRow).order_by(TokenRow.created_at, TokenRow.id)).all()
        return [_info(r) for r in rows]


def check_token(store: Store, token: str) -> TokenInfo | None:
    """The token's record (revoked or not) when ``token`` is one this store issued; ``None`` for anything
    else (malformed, unknown). Raises the store's errors when the database does not answer."""
    if not TOKEN_RE.match(token):
        return None
    # a Core query on a pooled connection, no ORM session: this runs for every authenticated request
    table = TokenRow.__table__
    with store._errors(), store.engine.connect() as conn:
        row = conn.execute(select(table).where(table.c.sha256 == digest(token))).one_or_none()
        return None if row is None else _info(row)  # type: ignore[arg-type]  # the row has TokenRow's columns
