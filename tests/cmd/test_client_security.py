"""The client side of SASL: SCRAM checked against scramp's server (the library kcompat's broker
uses), PLAIN and OAUTHBEARER messages as RFC 4616/7628 write them, and the unsecured JWT."""

from __future__ import annotations

import base64
import json

import pytest
from scramp import ScramMechanism

from kcompat.client.security import ScramClient, oauthbearer_message, plain_message, unsecured_jwt


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_client_authenticates_against_a_real_server(mechanism: str) -> None:
    m = ScramMechanism(mechanism)
    salt, stored_key, server_key, iterations = m.make_auth_info("pen,cil=", iteration_count=4096)
    users: list[str] = []
    server = m.make_server(lambda user: (users.append(user), (salt, stored_key, server_key, iterations))[1])
    client = ScramClient(mechanism, "al=ice,", "pen,cil=")
    server.set_client_first(client.first().decode())
    assert users == ["al=ice,"]
    final = client.final(server.get_server_first().encode())
    server.set_client_final(final.decode())
    assert client.verify(server.get_server_final().encode())


def test_scram_client_refuses_a_wrong_server_signature_and_a_bad_nonce() -> None:
    client = ScramClient("SCRAM-SHA-256", "u", "p", nonce="abc")
    with pytest.raises(ValueError, match="malformed"):
        client.final(b"r=other,s=c2FsdA==,i=4096")
    client.final(b"r=abcdef,s=c2FsdA==,i=4096")
    assert not client.verify(b"v=" + base64.b64encode(b"x" * 32))
    assert not client.verify(b"e=invalid-proof")


def test_plain_and_oauthbearer_messages() -> None:
    assert plain_message("bob", "s3cret") == b"\x00bob\x00s3cret"
    token = unsecured_jwt("svc", lifetime_s=60, now=1000)
    header, payload, signature = token.split(".")
    pad = lambda s: s + "=" * (-len(s) % 4)  # noqa: E731
    assert json.loads(base64.urlsafe_b64decode(pad(header))) == {"alg": "none"}
    assert json.loads(base64.urlsafe_b64decode(pad(payload))) == {"sub": "svc", "iat": 1000, "exp": 1060}
    assert signature == ""
    assert oauthbearer_message(token) == f"n,,\x01auth=Bearer {token}\x01\x01".encode()
