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

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool

from fleetdx.orchestrator.store import Store
from fleetdx.orchestrator.store.tokens import TokenInfo, TokenScope, check_token

_bearer = HTTPBearer(auto_error=False, description="A fleetdx API token (`fleetdx token create`).")


def _challenge(status: int, detail: str, error: str | None = None) -> HTTPException:
    value = 'Bearer realm="fleetdx"' + (f', error="{error}"' if error else "")
    return HTTPException(status_code=status, detail=detail, headers={"WWW-Authenticate": value})


class Auth:
    """The token check of one app: its store and whether reads need a token (see the module doc)."""

    def __init__(self, store: Store, reads_need_token: bool) -> None:
        self.store = store
        self.reads_need_token = reads_need_token

    def check(self, scope: TokenScope, credentials: HTTPAuthorizationCredentials | None) -> TokenInfo | None:
        """Let a request through only with what ``scope`` needs: the caller's token record, or ``None`` for an
        open read without a token.

        Raises:
            HTTPException: 401 (no, unknown, malformed or revoked token where one is needed), 403 (a read token
                on a write).
        """
        if credentials is None:
            if scope is TokenScope.WRITE or self.reads_need_token:
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

    async def check_async(
        self, scope: TokenScope, credentials: HTTPAuthorizationCredentials | None
    ) -> TokenInfo | None:
        """:meth:`check` from a coroutine: a request without a token is decided at once, a token is looked up
        in the thread pool (a database query)."""
        if credentials is None:
            return self.check(scope, None)
        return await run_in_threadpool(self.check, scope, credentials)


def _auth_of(request: Request) -> Auth:
    auth = getattr(request.app.state, "auth", None)
    if not isinstance(auth, Auth):
        raise RuntimeError("the app has no Auth in app.state.auth (build it with create_app)")
    return auth


async def require_read(
    request: Request,
    credentials: HTTPAuthorizationCredentials | None = Depends(_bearer),  # noqa: B008
) -> TokenInfo | None:
    """FastAPI dependency of a read endpoint (the app's :class:`Auth` in ``app.state.auth``). A coroutine: an
    open read without a token takes no hop to the thread pool."""
    return await _auth_of(request).check_async(TokenScope.READ, credentials)


async def require_write(
    request: Request,
    credentials: HTTPAuthorizationCredentials | None = Depends(_bearer),  # noqa: B008
) -> TokenInfo | None:
    """FastAPI dependency of a write endpoint (the app's :class:`Auth` in ``app.state.auth``)."""
    return await _auth_of(request).check_async(TokenScope.WRITE, credentials)
