"""Bearer-token authentication of the HTTP API (RFC 6750), against the tokens in the store.

- A write needs an active ``write`` token: no token, or a malformed, unknown or revoked one, is 401 with
  ``WWW-Authenticate: Bearer``; an active ``read`` token is 403 (``error="insufficient_scope"``).
- A read needs a token only when the service was started with reads protected (``fleetdx serve
  --auth-reads``): then the same 401 without one. When reads are open, a request that *presents* a token still
  has it checked (401 if it is invalid or revoked), so a client learns at once that its token is dead.

Tokens are checked against the database on every request (one indexed lookup of the token's SHA-256): a
revocation holds at once in every worker, and no worker keeps state of its own.
"""

from __future__ import annotations

from collections.abc import Callable

from fastapi import Depends, HTTPException
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from fleetdx.orchestrator.store import Store
from fleetdx.orchestrator.store.tokens import TokenInfo, TokenScope, check_token

_bearer = HTTPBearer(auto_error=False, description="A fleetdx API token (`fleetdx token create`).")


def _challenge(status: int, detail: str, error: str | None = None) -> HTTPException:
    value = 'Bearer realm="fleetdx"' + (f', error="{error}"' if error else "")
    return HTTPException(status_code=status, detail=detail, headers={"WWW-Authenticate": value})


class Auth:
    """Makes the FastAPI dependencies that guard the endpoints of one app."""

    def __init__(self, store: Store, reads_need_token: bool) -> None:
        self.store = store
        self.reads_need_token = reads_need_token

    def require(self, scope: TokenScope) -> Callable[..., TokenInfo | None]:
        """A dependency that lets a request through only with what ``scope`` needs (see the module doc);
        it returns the caller's token record, or ``None`` for an open read without a token."""
        required = scope is TokenScope.WRITE or self.reads_need_token

        def dependency(
            credentials: HTTPAuthorizationCredentials | None = Depends(_bearer),  # noqa: B008
        ) -> TokenInfo | None:
            if credentials is None:
                if required:
                    raise _challenge(401, f"a bearer token with scope {scope.value} is needed")
                return None
            info = check_token(self.store, credentials.credentials)
            if info is None:
                raise _challenge(401, "unknown or malformed token", "invalid_token")
            if not info.active:
                raise _challenge(401, f"token {info.token_id} was revoked", "invalid_token")
            if not info.allows(scope):
                raise _challenge(
                    403,
                    f"token {info.token_id} has scope {info.scope.value}; this needs {scope.value}",
                    "insufficient_scope",
                )
            return info

        return dependency
