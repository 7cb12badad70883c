"""The console's HTTP Basic login against PLAIN's JAAS users and the SCRAM store."""

from __future__ import annotations

import base64
from pathlib import Path

from kcompat.config import BrokerConfig
from kcompat.server.admin.login import BasicLogin, login_for
from kcompat.storage.scram_credentials import ScramCredential, ScramCredentialStore, from_password


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def test_plain_and_scram_users(tmp_path: Path) -> None:
    store = ScramCredentialStore(tmp_path)
    store.upsert("alice", "SCRAM-SHA-256", from_password("SCRAM-SHA-256", "alice-secret"))
    login = BasicLogin({"bob": "bob-secret"}, store.get)
    assert login.check(basic("bob", "bob-secret")) == "bob"
    assert login.check(basic("alice", "alice-secret")) == "alice"
    assert login.check(basic("alice", "alice-secret")) == "alice"  # remembered
    for bad in (
        basic("bob", "nope"),
        basic("alice", "bob-secret"),
        basic("eve", ""),
        "Basic !!!",
        "Bearer x",
        None,
    ):
        assert login.check(bad) is None


def test_only_with_a_sasl_listener(tmp_path: Path) -> None:
    store = ScramCredentialStore(tmp_path)
    assert login_for(BrokerConfig({"log.dirs": str(tmp_path)}), store.get) is None
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_bob="bob-secret";'
    config = BrokerConfig({
        "log.dirs": str(tmp_path), "listeners": "SASL_PLAINTEXT://127.0.0.1:9093",
        "sasl.enabled.mechanisms": "PLAIN", "sasl.jaas.config": jaas,
    })  # fmt: skip
    login = login_for(config, store.get)
    assert login is not None and login.check(basic("bob", "bob-secret")) == "bob"


def test_a_passed_login_is_remembered_for_a_minute_then_checked_again() -> None:
    now = [0.0]
    stored = {"SCRAM-SHA-256": from_password("SCRAM-SHA-256", "alice-secret")}
    looked_up: list[str] = []

    def scram_get(user: str, mechanism: str) -> ScramCredential | None:
        looked_up.append(mechanism)
        return stored.get(mechanism)

    login = BasicLogin({}, scram_get, clock=lambda: now[0])
    assert login.check(basic("alice", "alice-secret")) == "alice"
    checked = len(looked_up)
    now[0] += 59.0
    assert login.check(basic("alice", "alice-secret")) == "alice"
    assert len(looked_up) == checked  # remembered: the credential was not derived again
    stored["SCRAM-SHA-256"] = from_password("SCRAM-SHA-256", "changed")  # the password changed
    now[0] += 2.0  # a minute after the first check
    assert login.check(basic("alice", "alice-secret")) is None  # checked again, against the new one
