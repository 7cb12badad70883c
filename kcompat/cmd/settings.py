"""Connection settings, as rpk resolves them: a profile from the profiles file, then KCOMPAT_*
variables, then -X key=value, then the flags, each above the one before.

The profiles file is $KCOMPAT_PROFILES, else $XDG_CONFIG_HOME/kcompat/profiles.toml, else
~/.config/kcompat/profiles.toml:

    current = "prod"
    [profiles.prod]
    brokers = "b1:9093,b2:9093"
    user = "alice"
    pass = "secret"
    [profiles.prod.tls]
    enabled = true
    ca = "/etc/kafka/ca.pem"
    [profiles.prod.sasl]
    mechanism = "SCRAM-SHA-512"
"""

from __future__ import annotations

import json
import os
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kcompat.client.security import MECHANISMS, ClientSecurity
from kcompat.cmd.formats import FormatError

DEFAULT_BROKERS = "127.0.0.1:9092"
BOOTSTRAP_ENV = "KCOMPAT_BOOTSTRAP"
DEPRECATED_BROKERS_ENV = "KCOMPAT_BROKERS"
PROFILE_ENV = "KCOMPAT_PROFILE"
PROFILES_FILE_ENV = "KCOMPAT_PROFILES"

# setting -> its KCOMPAT_* variable; the settings -X takes and a profile stores.
KEYS: dict[str, str] = {
    "brokers": BOOTSTRAP_ENV,
    "timeout": "KCOMPAT_TIMEOUT",
    "tls.enabled": "KCOMPAT_TLS_ENABLED",
    "tls.ca": "KCOMPAT_TLS_CA",
    "tls.cert": "KCOMPAT_TLS_CERT",
    "tls.key": "KCOMPAT_TLS_KEY",
    "tls.insecure_skip_verify": "KCOMPAT_TLS_INSECURE_SKIP_VERIFY",
    "sasl.mechanism": "KCOMPAT_SASL_MECHANISM",
    "user": "KCOMPAT_USER",
    "pass": "KCOMPAT_PASS",
    "sasl.token": "KCOMPAT_SASL_TOKEN",
}
# Other spellings people type (Kafka's and librdkafka's names among them).
ALIASES = {
    "bootstrap": "brokers",
    "bootstrap.servers": "brokers",
    "password": "pass",
    "sasl.username": "user",
    "sasl.user": "user",
    "sasl.password": "pass",
    "sasl.pass": "pass",
    "sasl.mechanisms": "sasl.mechanism",
    "tls.cacert": "tls.ca",
    "ssl.ca.location": "tls.ca",
    "ssl.certificate.location": "tls.cert",
    "ssl.key.location": "tls.key",
}
BOOLEANS = ("tls.enabled", "tls.insecure_skip_verify")
SECRET = ("pass", "sasl.token")
_warned: set[str] = set()


@dataclass(frozen=True, slots=True)
class Settings:
    brokers: str
    timeout: float
    security: ClientSecurity
    profile: str | None


def canonical(key: str) -> str:
    key = key.strip().lower()
    key = ALIASES.get(key, key)
    if key not in KEYS:
        raise FormatError(f"-X {key}: known settings are {', '.join(KEYS)}")
    return key


def parse_x(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise FormatError(f"-X {item!r} is not of the form key=value")
        out[canonical(key)] = value.strip()
    return out


def profiles_path() -> Path:
    explicit = os.environ.get(PROFILES_FILE_ENV)
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "kcompat" / "profiles.toml"


def load_profiles(path: Path | None = None) -> tuple[str | None, dict[str, dict[str, Any]]]:
    """(current profile, name -> flat settings) from the profiles file; (None, {}) without one."""
    path = path or profiles_path()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None, {}
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise FormatError(f"cannot read the profiles file {path}: {e}") from None
    profiles = data.get("profiles", {})
    if not isinstance(profiles, dict):
        raise FormatError(f"{path}: [profiles] must be a table of profiles")
    out = {}
    for name, table in profiles.items():
        if not isinstance(table, dict):
            raise FormatError(f"{path}: profile {name} must be a table")
        out[name] = {canonical(k): v for k, v in _flatten(table).items()}
    current = data.get("current")
    return (current if isinstance(current, str) else None), out


def save_profiles(current: str | None, profiles: dict[str, dict[str, Any]], path: Path | None = None) -> Path:
    """Write the file (mode 0600: it may hold passwords), nested tables for dotted settings."""
    path = path or profiles_path()
    lines = ["# kcompat connection profiles (kcompat profile --help)"]
    if current is not None:
        lines.append(f"current = {json.dumps(current)}")
    for name in sorted(profiles):
        flat = profiles[name]
        tables: dict[str, dict[str, Any]] = {}
        for key, value in flat.items():
            head, _, leaf = key.rpartition(".")
            tables.setdefault(head, {})[leaf] = value
        for head in sorted(tables):
            lines.append("")
            lines.append(f"[profiles.{json.dumps(name)}{'.' + head if head else ''}]")
            for leaf, value in sorted(tables[head].items()):
                lines.append(f"{leaf} = {_toml_value(value)}")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    os.chmod(path, 0o600)
    return path


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return json.dumps(str(value))  # a TOML basic string takes JSON's escapes


def _flatten(table: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in table.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def typed(key: str, value: Any) -> Any:
    """A setting's value as its type: booleans and the timeout parsed, the rest as text."""
    if key in BOOLEANS:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("true", "1", "yes", "on"):
            return True
        if text in ("false", "0", "no", "off", ""):
            return False
        raise FormatError(f"{key}={value!r}: expected true or false")
    if key == "timeout":
        try:
            seconds = float(value)
        except (TypeError, ValueError):
            raise FormatError(f"timeout={value!r} is not a number of seconds") from None
        if seconds <= 0:
            raise FormatError("the timeout must be positive")
        return seconds
    if key == "sasl.mechanism":
        mechanism = str(value).strip().upper()
        if mechanism and mechanism not in MECHANISMS:
            raise FormatError(f"sasl.mechanism={value}: known mechanisms are {', '.join(MECHANISMS)}")
        return mechanism or None
    return str(value)


def environment_settings(env: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ if env is None else env)
    out = {key: env[var] for key, var in KEYS.items() if env.get(var)}
    if "brokers" not in out and env.get(DEPRECATED_BROKERS_ENV):
        out["brokers"] = env[DEPRECATED_BROKERS_ENV]
        if DEPRECATED_BROKERS_ENV not in _warned:
            _warned.add(DEPRECATED_BROKERS_ENV)
            print(
                f"kcompat: {DEPRECATED_BROKERS_ENV} is deprecated; set {BOOTSTRAP_ENV} instead",
                file=sys.stderr,
            )
    return out


def flag_settings(args: Any) -> dict[str, Any]:
    flags = {
        "brokers": getattr(args, "brokers", None),
        "timeout": getattr(args, "timeout", None),
        "tls.enabled": True if getattr(args, "tls", False) else None,
        "tls.ca": getattr(args, "cacert", None),
        "tls.cert": getattr(args, "tls_cert", None),
        "tls.key": getattr(args, "tls_key", None),
        "sasl.mechanism": getattr(args, "sasl_mechanism", None),
        "user": getattr(args, "user", None),
        "pass": getattr(args, "password", None),
    }
    return {k: v for k, v in flags.items() if v is not None}


def resolve(args: Any, env: dict[str, str] | None = None) -> Settings:
    """The settings a command connects with: profile < KCOMPAT_* < -X < flags."""
    env_values = environment_settings(env)
    current, profiles = load_profiles()
    chosen = getattr(args, "profile", None) or (env if env is not None else os.environ).get(PROFILE_ENV)
    name = chosen or current
    values: dict[str, Any] = {}
    if name is not None:
        if name not in profiles:
            if chosen:
                known = ", ".join(sorted(profiles)) or "none yet"
                raise FormatError(f"no profile {name} in {profiles_path()} (profiles: {known})")
            name = None  # a stale `current` falls back to no profile
        else:
            values.update(profiles[name])
    values.update(env_values)
    values.update(parse_x(list(getattr(args, "x_options", None) or [])))
    values.update(flag_settings(args))
    v = {k: typed(k, val) for k, val in values.items()}
    mechanism = v.get("sasl.mechanism")
    if mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512") and (not v.get("user") or "pass" not in v):
        raise FormatError(f"SASL {mechanism} needs --user and --password (or -X user=... -X pass=...)")
    if mechanism == "OAUTHBEARER" and not (v.get("user") or v.get("sasl.token")):
        raise FormatError("SASL OAUTHBEARER needs --user (the token's subject) or -X sasl.token=TOKEN")
    if (v.get("user") or v.get("pass")) and not mechanism:
        raise FormatError("--user/--password need --sasl-mechanism (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)")
    tls = bool(v.get("tls.enabled")) or any(v.get(k) for k in ("tls.ca", "tls.cert", "tls.key"))
    if "tls.enabled" in v and v["tls.enabled"] is False:
        tls = False
    security = ClientSecurity(
        tls=tls,
        ca=v.get("tls.ca"),
        cert=v.get("tls.cert"),
        key=v.get("tls.key"),
        insecure_skip_verify=bool(v.get("tls.insecure_skip_verify")),
        sasl_mechanism=mechanism,
        user=v.get("user"),
        password=v.get("pass"),
        token=v.get("sasl.token"),
    )
    return Settings(v.get("brokers") or DEFAULT_BROKERS, v.get("timeout", 10.0), security, name)
