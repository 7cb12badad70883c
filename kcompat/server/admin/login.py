"""The admin listener's login when a Kafka listener uses SASL: HTTP Basic, checked against the
broker's own users (PLAIN's JAAS users, and the SCRAM credentials: the password is salted and
hashed as the client would and compared with the StoredKey, so no password is kept).

    login_for(config, scram_get) -> BasicLogin | None   (None: no SASL listener, no login)
    users(config, scram_get) -> BasicLogin              (the console's login: always)
    BasicLogin.check(authorization header value) -> the user name, or None

A SCRAM check costs one PBKDF2 (4096+ iterations, milliseconds) on the event loop, so a header
that passed is remembered (by its SHA-256, never the text) for CACHE_S seconds: a browser sends it
with every page and script. A changed or deleted password is refused at the latest then.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping

from kcompat.config.broker_config import BrokerConfig
from kcompat.config.security import plain_users
from kcompat.storage.scram_credentials import ScramCredential, from_password

CACHE_S = 60.0
CACHE_SIZE = 64
REALM = 'Basic realm="kcompat", charset="UTF-8"'

ScramLookup = Callable[[str, str], ScramCredential | None]


class BasicLogin:
    def __init__(
        self, plain: Mapping[str, str], scram_get: ScramLookup, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._plain = dict(plain)
        self._clock = clock  # seconds, for how long a login that passed is remembered
        self._scram_get = scram_get
        self._passed: OrderedDict[bytes, tuple[float, str]] = OrderedDict()

    def check(self, header: str | None) -> str | None:
        if not header or header[:6].lower() != "basic ":
            return None
        key = hashlib.sha256(header.encode()).digest()
        now = self._clock()
        hit = self._passed.get(key)
        if hit is not None and hit[0] > now:
            return hit[1]
        try:
            user, sep, password = base64.b64decode(header[6:].strip(), validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return None
        if not sep or not self.valid(user, password):
            return None
        self._passed[key] = (now + CACHE_S, user)
        self._passed.move_to_end(key)
        while len(self._passed) > CACHE_SIZE:
            self._passed.popitem(last=False)
        return user

    def valid(self, user: str, password: str) -> bool:
        expected = self._plain.get(user)
        if expected is not None and hmac.compare_digest(expected.encode(), password.encode()):
            return True
        for mechanism in ("SCRAM-SHA-512", "SCRAM-SHA-256"):
            stored = self._scram_get(user, mechanism)
            if stored is not None:
                derived = from_password(mechanism, password, stored.iterations, stored.salt)
                return hmac.compare_digest(derived.stored_key, stored.stored_key)
        return False


def login_for(config: BrokerConfig, scram_get: ScramLookup) -> BasicLogin | None:
    """The login the admin listener asks for: only when some Kafka listener uses SASL."""
    if not any(s.sasl is not None for s in config.listener_security.values()):
        return None
    return users(config, scram_get)


def users(config: BrokerConfig, scram_get: ScramLookup) -> BasicLogin:
    """The broker's own users (PLAIN's JAAS users of every SASL listener, the SCRAM store): the
    console's login checks these whether or not a listener asks clients for SASL."""
    plain: dict[str, str] = {}
    for security in config.listener_security.values():
        if security.sasl is not None and "PLAIN" in security.sasl.jaas:
            plain.update(plain_users(security.sasl.jaas["PLAIN"]))
    return BasicLogin(plain, scram_get)
