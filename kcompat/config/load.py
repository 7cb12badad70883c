"""Assembling the broker configuration from its sources.

Precedence, lowest first: built-in defaults < server.properties file < KAFKA_* environment
variables < --override key=value. Unknown properties are logged (one warning each) and ignored;
an invalid value raises ConfigError whose message names the key, the value, what was expected and
where it was set.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from kcompat.config.broker_config import BrokerConfig
from kcompat.config.environment import EXCLUDED, PREFIX, env_key_to_property, properties_from_env
from kcompat.config.errors import ConfigError
from kcompat.config.properties_file import read_properties_file


def parse_override(text: str) -> tuple[str, str]:
    """`key=value` from the command line (the value may itself contain '=')."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"--override {text!r} is invalid: expected key=value", value=text)
    return key.strip(), value


def _env_origins(environ: Mapping[str, str]) -> dict[str, str]:
    origins = {}
    for name in environ:
        if name.startswith(PREFIX) and name not in EXCLUDED and len(name) > len(PREFIX):
            origins[env_key_to_property(name[len(PREFIX) :])] = f"environment variable {name}"
    if environ.get("CLUSTER_ID") and "cluster.id" not in origins:
        origins["cluster.id"] = "environment variable CLUSTER_ID"
    return origins


def load_config(
    path: str | Path | None = None,
    overrides: Iterable[str] | Mapping[str, str] = (),
    environ: Mapping[str, str] | None = None,
    *,
    warn: bool = True,
) -> BrokerConfig:
    """The broker configuration from a properties file, the environment and overrides."""
    merged: dict[str, str] = {}
    origins: dict[str, str] = {}
    if path is not None:
        for key, value in read_properties_file(path).items():
            merged[key] = value
            origins[key] = str(path)
    env = os.environ if environ is None else environ
    env_props = properties_from_env(env)
    env_origin = _env_origins(env)
    for key, value in env_props.items():
        merged[key] = value
        origins[key] = env_origin.get(key, "the environment")
    pairs = overrides.items() if isinstance(overrides, Mapping) else (parse_override(o) for o in overrides)
    for key, value in pairs:
        merged[key] = value
        origins[key] = "--override"
    return BrokerConfig(merged, origins=origins, warn=warn)
