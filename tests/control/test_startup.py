"""Start-up: settings from file and environment, secrets generated or checked, the admin token,
the bootstrap section, the first snapshot."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
import sqlalchemy as sa
from sluicegate._core import Core

from control.api.errors import StartupError
from control.bridge.core_bridge import CoreBridge
from control.crypto import CredentialCipher
from control.process.settings import ENV, BootstrapSettings, Settings, load_settings
from control.process.startup import prepare
from control.providers.models import Provider
from control.tenants.models import Tenant
from tests.control.helpers import ADMIN_TOKEN, ENCRYPTION_KEY, PEPPER

ROOT = Path(__file__).resolve().parents[2]


def _start(tmp_path: Path, **env: str) -> tuple[object, str | None]:
    values = {"SLUICEGATE_DATABASE_URL": f"sqlite:///{tmp_path}/s.db"} | env
    ctx, token = prepare(load_settings(None, values), CoreBridge(Core(workers=1)))
    ctx.engine.dispose()
    return ctx, token


def test_the_example_config_is_valid_and_complete() -> None:
    path = ROOT / "control" / "sluicegate.example.toml"
    settings = load_settings(path, {})
    defaults = Settings()
    assert settings.model_dump(exclude={"bootstrap"}) == defaults.model_dump(exclude={"bootstrap"})
    text = path.read_text()
    for section in ("server", "tls", "database", "secrets", "core", "usage", "tracing", "metrics"):
        for name in Settings.model_fields[section].annotation.model_fields:  # type: ignore[union-attr]
            assert f"{name} = " in text, f"{section}.{name} is not documented"
    for variable in ENV:
        assert variable in text, variable
    # The commented bootstrap example is valid too.
    example = text.split("# --- bootstrap example ---\n", 1)[1]
    uncommented = "\n".join(
        line.removeprefix("#").removeprefix(" ") for line in example.splitlines()
    )
    bootstrap = BootstrapSettings.model_validate(tomllib.loads(uncommented)["bootstrap"])
    assert bootstrap.pools[0].members[1].http2 and bootstrap.routes[0].alias == "llama-3-8b"


def test_toml_yaml_and_environment(tmp_path: Path) -> None:
    toml = tmp_path / "s.toml"
    toml.write_text('[server]\nadmin_listen = "127.0.0.1:9999"\n[core]\nworkers = 3\n')
    yaml = tmp_path / "s.yaml"
    yaml.write_text("server:\n  admin_listen: 127.0.0.1:9998\nusage:\n  drain_batch: 7\n")
    assert load_settings(toml, {}).server.admin_listen == "127.0.0.1:9999"
    assert load_settings(toml, {}).core.workers == 3
    assert load_settings(yaml, {}).usage.drain_batch == 7
    env = {"SLUICEGATE_ADMIN_LISTEN": "127.0.0.1:7777", "SLUICEGATE_CORE_WORKERS": "5"}
    overridden = load_settings(toml, env)
    assert (overridden.server.admin_listen, overridden.core.workers) == ("127.0.0.1:7777", 5)


def test_bad_settings_name_the_option_not_the_value(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text(
        '[secrets]\nkey_pepper = "short-CANARY"\n[server]\nadmin_listen = "nope"\nbogus = 1\n'
    )
    with pytest.raises(StartupError) as failed:
        load_settings(path, {})
    message = str(failed.value)
    assert "secrets.key_pepper" in message and "server.admin_listen" in message
    assert "server.bogus" in message
    assert "short-CANARY" not in message
    with pytest.raises(StartupError, match="not valid"):
        (tmp_path / "broken.toml").write_text("[server\n")
        load_settings(tmp_path / "broken.toml", {})


def test_embedded_mode_generates_and_keeps_its_secrets(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ctx, token = _start(tmp_path)
    assert token is not None and token.startswith("sgt_")
    key_file = tmp_path / "s.db.key"
    assert key_file.stat().st_mode & 0o777 == 0o600
    pepper = ctx.pepper  # type: ignore[attr-defined]
    ctx2, token2 = _start(tmp_path)
    assert token2 is None  # an admin token exists: nothing new is generated
    assert ctx2.pepper == pepper  # type: ignore[attr-defined]
    assert capsys.readouterr().out == ""  # prepare() itself prints nothing
    engine = sa.create_engine(f"sqlite:///{tmp_path}/s.db")
    with engine.connect() as conn:
        hashes = conn.execute(sa.text("SELECT token_hash FROM admin_tokens")).scalars().all()
    assert token not in str(hashes) and len(hashes) == 1


def test_a_changed_pepper_is_refused_while_keys_exist(tmp_path: Path) -> None:
    env = {"SLUICEGATE_KEY_PEPPER": PEPPER, "SLUICEGATE_ENCRYPTION_KEY": ENCRYPTION_KEY}
    _start(tmp_path, **env)
    engine = sa.create_engine(f"sqlite:///{tmp_path}/s.db")
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO tenants (id, name, status, created_at, updated_at) "
                "VALUES ('t', 'T', 'active', '2024-01-01', '2024-01-01')"
            )
        )
        conn.execute(
            sa.text(
                "INSERT INTO api_keys (id, tenant_id, prefix, hash, status, priority, "
                "created_at, updated_at) VALUES ('k', 't', 'sk-sg-aaaaaa', :h, 'active', "
                "'interactive', '2024-01-01', '2024-01-01')"
            ),
            {"h": "0" * 64},
        )
    with pytest.raises(StartupError, match="key pepper differs") as failed:
        _start(tmp_path, **(env | {"SLUICEGATE_KEY_PEPPER": "another-pepper-0123456789"}))
    assert "another-pepper" not in str(failed.value)


def test_a_changed_encryption_key_is_refused_while_credentials_exist(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from control.api.app import create_app

    env = {
        "SLUICEGATE_DATABASE_URL": f"sqlite:///{tmp_path}/s.db",
        "SLUICEGATE_ENCRYPTION_KEY": ENCRYPTION_KEY,
        "SLUICEGATE_ADMIN_TOKEN": ADMIN_TOKEN,
    }
    with TestClient(create_app(load_settings(None, env), CoreBridge(Core(workers=1)))) as client:
        created = client.post(
            "/v1/admin/providers",
            json={
                "id": "p",
                "kind": "openai",
                "base_url": "http://127.0.0.1:1/v1",
                "credential": "sk-xxxxxxxx",
            },
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
        )
        assert created.status_code == 201
    other = CredentialCipher.generate_key()
    with pytest.raises(StartupError, match="cannot decrypt"):
        _start(tmp_path, SLUICEGATE_ENCRYPTION_KEY=other)
    # Listing the new key first and the old one after rotates the stored credentials...
    _start(tmp_path, SLUICEGATE_ENCRYPTION_KEY=f"{other},{ENCRYPTION_KEY}")
    # ...after which the old key can go.
    ctx, _ = _start(tmp_path, SLUICEGATE_ENCRYPTION_KEY=other)
    with ctx.sessions() as session:  # type: ignore[attr-defined]
        provider = session.get(Provider, "p")
        assert ctx.cipher.decrypt(provider.credential_ciphertext) == "sk-xxxxxxxx"  # type: ignore[attr-defined]
    with pytest.raises(StartupError, match="not a Fernet key"):
        _start(tmp_path, SLUICEGATE_ENCRYPTION_KEY="not-a-key")


def test_postgresql_needs_configured_secrets(pg_schema_url: str) -> None:
    settings = load_settings(None, {"SLUICEGATE_DATABASE_URL": pg_schema_url})
    with pytest.raises(StartupError, match="key_pepper"):
        prepare(settings, CoreBridge(Core(workers=1)))
    settings = load_settings(
        None, {"SLUICEGATE_DATABASE_URL": pg_schema_url, "SLUICEGATE_KEY_PEPPER": PEPPER}
    )
    with pytest.raises(StartupError, match="encryption_key"):
        prepare(settings, CoreBridge(Core(workers=1)))


def test_configured_admin_token_replaces_the_previous_bootstrap_token(tmp_path: Path) -> None:
    _, generated = _start(tmp_path)
    assert generated is not None
    _start(tmp_path, SLUICEGATE_ADMIN_TOKEN=ADMIN_TOKEN)
    _start(tmp_path, SLUICEGATE_ADMIN_TOKEN=ADMIN_TOKEN)  # the same token again: no change
    engine = sa.create_engine(f"sqlite:///{tmp_path}/s.db")
    with engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT prefix, revoked_at IS NULL FROM admin_tokens")).all()
    assert sorted(rows, key=lambda r: r[1]) == [(generated[:12], 0), ("config", 1)]


def test_bootstrap_creates_what_is_missing_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SIM_CREDENTIAL", "sk-from-the-environment")
    config = tmp_path / "boot.toml"
    config.write_text(
        f"""
[database]
url = "sqlite:///{tmp_path}/s.db"
[[bootstrap.tenants]]
id = "acme"
name = "Acme"
rpm = 60
[[bootstrap.providers]]
id = "sim"
kind = "openai"
base_url = "http://127.0.0.1:9000/v1"
credential_env = "SIM_CREDENTIAL"
[[bootstrap.pools]]
id = "main"
members = [{{ provider_id = "sim", weight = 2 }}]
[[bootstrap.routes]]
alias = "chat"
chain = [{{ pool = "main", model = "sim-llama" }}]
[[bootstrap.prices]]
model = "chat"
input_micros_per_mtok = 100
output_micros_per_mtok = 200
"""
    )
    for _ in range(2):
        ctx, _ = prepare(load_settings(config, {}), CoreBridge(Core(workers=1)))
        with ctx.sessions() as session:
            payload = ctx.mutator.snapshot(session).payload
            assert session.scalar(sa.select(sa.func.count()).select_from(Tenant)) == 1
            prices = session.execute(sa.text("SELECT COUNT(*) FROM prices")).scalar()
        ctx.engine.dispose()
    assert prices == 1
    assert '"credential":"sk-from-the-environment"' in payload and '"weight":2' in payload

    monkeypatch.delenv("SIM_CREDENTIAL")
    (tmp_path / "s.db").unlink()
    with pytest.raises(StartupError, match="SIM_CREDENTIAL"):
        prepare(load_settings(config, {}), CoreBridge(Core(workers=1)))


def test_bootstrap_errors_stop_the_start(tmp_path: Path) -> None:
    config = tmp_path / "boot.toml"
    config.write_text(
        f'[database]\nurl = "sqlite:///{tmp_path}/s.db"\n'
        '[[bootstrap.providers]]\nid = "meta"\nkind = "openai"\n'
        'base_url = "http://169.254.169.254/v1"\n'
    )
    with pytest.raises(StartupError, match="metadata"):
        prepare(load_settings(config, {}), CoreBridge(Core(workers=1)))
    config.write_text('[[bootstrap.tenants]]\nname = "no id"\n')
    with pytest.raises(StartupError, match=r"bootstrap.tenants\[0\] needs an id"):
        prepare(
            load_settings(config, {"SLUICEGATE_DATABASE_URL": f"sqlite:///{tmp_path}/t.db"}),
            CoreBridge(Core(workers=1)),
        )
