"""``fleetdx token create|revoke|list`` and the token store: tokens are stored hashed (SHA-256, never the
token), shown once, revoked for good; on SQLite and PostgreSQL."""

from __future__ import annotations

import hashlib
import json
import stat
from pathlib import Path

import pytest
import typer
from sqlalchemy import select
from sqlalchemy.orm import Session
from typer.testing import CliRunner

from fleetdx.orchestrator.cli import token_cmd
from fleetdx.orchestrator.store import Store, StoreError
from fleetdx.orchestrator.store.models import TokenRow
from fleetdx.orchestrator.store.tokens import (
    TOKEN_RE,
    TokenNotFound,
    TokenScope,
    check_token,
    create_token,
    list_tokens,
    revoke_token,
)

pytest_plugins = ["tests.pgfixtures"]


def cli() -> typer.Typer:
    app = typer.Typer()
    token_cmd.register(app)
    return app


def test_only_the_sha256_of_a_token_is_stored(store: Store) -> None:
    new = create_token(store, "prolog", TokenScope.WRITE, now=1000.0)
    assert TOKEN_RE.match(new.token) and new.token.startswith(f"fdx_{new.info.token_id}_")
    with Session(store.engine) as session:
        row = session.scalars(select(TokenRow)).one()
        stored = [row.token_id, row.name, row.scope, row.sha256]
    assert row.sha256 == hashlib.sha256(new.token.encode()).hexdigest()
    secret = TOKEN_RE.match(new.token).group(2)  # type: ignore[union-attr]  (the secret may hold "_")
    assert not any(secret in str(v) for v in stored)
    assert check_token(store, new.token) == new.info
    assert new.info.allows(TokenScope.WRITE) and new.info.allows(TokenScope.READ)


def test_read_token_cannot_write_and_unknown_tokens_are_none(store: Store) -> None:
    read = create_token(store, "grafana", TokenScope.READ)
    assert read.info.allows(TokenScope.READ) and not read.info.allows(TokenScope.WRITE)
    tampered = read.token[:-1] + ("A" if read.token[-1] != "A" else "B")
    assert check_token(store, tampered) is None
    assert check_token(store, "") is None and check_token(store, "fdx_\x00") is None


def test_revoke_is_immediate_and_kept(store: Store) -> None:
    new = create_token(store, "old", TokenScope.WRITE)
    info = revoke_token(store, new.info.token_id, now=2000.0)
    assert info.revoked_at == 2000.0 and not info.active and not info.allows(TokenScope.READ)
    checked = check_token(store, new.token)
    assert checked is not None and checked.revoked_at == 2000.0
    assert revoke_token(store, new.info.token_id, now=3000.0).revoked_at == 2000.0  # first revocation kept
    with pytest.raises(TokenNotFound, match="no token with id"):
        revoke_token(store, "0123456789ab")
    with pytest.raises(TokenNotFound):
        revoke_token(store, "'; drop table")


def test_bad_names_are_refused(store: Store) -> None:
    for name in ("", "x" * 256, "a\nb", "nul\x00"):
        with pytest.raises(StoreError, match="token name"):
            create_token(store, name, TokenScope.READ)
    assert list_tokens(store) == []


def test_cli_create_list_revoke(migrated_url: str, tmp_path: Path) -> None:
    runner = CliRunner()
    made = runner.invoke(cli(), ["token", "create", "slurm-prolog", "--scope", "write", "--db", migrated_url])
    assert made.exit_code == 0, made.output
    token = made.stdout.strip()
    assert TOKEN_RE.match(token), made.stdout
    token_id = token.split("_")[1]
    assert f"token {token_id} (write)" in made.stderr

    out = tmp_path / "read.token"
    second = runner.invoke(cli(), ["token", "create", "prometheus", "--out", str(out), "--db", migrated_url])
    assert second.exit_code == 0 and second.stdout == ""
    assert TOKEN_RE.match(out.read_text().strip()) and stat.S_IMODE(out.stat().st_mode) == 0o600
    again = runner.invoke(cli(), ["token", "create", "x", "--out", str(out), "--db", migrated_url])
    assert again.exit_code == 3 and "already exists" in again.stderr

    listed = runner.invoke(cli(), ["token", "list", "--json", "--db", migrated_url])
    rows = json.loads(listed.stdout)
    assert [(r["name"], r["scope"], r["revoked_at"]) for r in rows] == [
        ("slurm-prolog", "write", None),
        ("prometheus", "read", None),
    ]
    assert token not in listed.stdout

    revoked = runner.invoke(cli(), ["token", "revoke", token_id, "--db", migrated_url])
    assert revoked.exit_code == 0 and f"token {token_id} (slurm-prolog) revoked at" in revoked.stdout
    table = runner.invoke(cli(), ["token", "list", "--db", migrated_url])
    assert table.exit_code == 0 and "slurm-prolog" in table.stdout and "2 API tokens" in table.stdout

    missing = runner.invoke(cli(), ["token", "revoke", "ffffffffffff", "--db", migrated_url])
    assert missing.exit_code == 3 and "no token with id 'ffffffffffff'" in missing.stderr
    bad_scope = runner.invoke(cli(), ["token", "create", "x", "--scope", "admin", "--db", migrated_url])
    assert bad_scope.exit_code == 2  # click's usage error
