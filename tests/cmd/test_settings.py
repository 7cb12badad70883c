"""Connection settings: profile < KCOMPAT_* < -X < flags, the profiles file, and what is refused."""

from __future__ import annotations

import argparse
import os
import stat
from pathlib import Path

import pytest

from kcompat.cmd import common, settings
from kcompat.cmd.formats import FormatError


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    for var in [*settings.KEYS.values(), settings.DEPRECATED_BROKERS_ENV, settings.PROFILE_ENV]:
        monkeypatch.delenv(var, raising=False)
    path = tmp_path / "kcompat" / "profiles.toml"
    monkeypatch.setenv(settings.PROFILES_FILE_ENV, str(path))
    settings._warned.clear()
    return path


def args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    common.add_connection_options(parser)
    return parser.parse_args(list(argv))


def test_defaults_are_plaintext_localhost() -> None:
    s = settings.resolve(args())
    assert (s.brokers, s.timeout, s.profile) == ("127.0.0.1:9092", 10.0, None)
    assert s.security.protocol == "PLAINTEXT"


def test_each_layer_overrides_the_one_below(monkeypatch: pytest.MonkeyPatch) -> None:
    settings.save_profiles(
        "dev",
        {
            "dev": {
                "brokers": "profile:1",
                "timeout": 3.0,
                "sasl.mechanism": "PLAIN",
                "user": "p",
                "pass": "pp",
            }
        },
    )
    s = settings.resolve(args())
    assert (s.brokers, s.timeout, s.profile, s.security.user) == ("profile:1", 3.0, "dev", "p")
    monkeypatch.setenv("KCOMPAT_BOOTSTRAP", "env:2")
    monkeypatch.setenv("KCOMPAT_USER", "e")
    s = settings.resolve(args())
    assert (s.brokers, s.security.user, s.security.password) == ("env:2", "e", "pp")
    s = settings.resolve(args("-X", "brokers=x:3", "-X", "user=x"))
    assert (s.brokers, s.security.user) == ("x:3", "x")
    s = settings.resolve(args("-X", "brokers=x:3", "-b", "flag:4", "--user", "f", "-X", "user=x"))
    assert (s.brokers, s.security.user, s.security.sasl_mechanism) == ("flag:4", "f", "PLAIN")


def test_kcompat_brokers_still_works_with_one_deprecation_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("KCOMPAT_BROKERS", "old:1")
    assert settings.resolve(args()).brokers == "old:1"
    assert settings.resolve(args()).brokers == "old:1"
    assert (
        capsys.readouterr().err == "kcompat: KCOMPAT_BROKERS is deprecated; set KCOMPAT_BOOTSTRAP instead\n"
    )
    monkeypatch.setenv("KCOMPAT_BOOTSTRAP", "new:2")
    assert settings.resolve(args()).brokers == "new:2"


def test_tls_and_sasl_from_flags_x_and_aliases() -> None:
    s = settings.resolve(args("--cacert", "/ca.pem"))
    assert (s.security.tls, s.security.ca, s.security.protocol) == (True, "/ca.pem", "SSL")
    s = settings.resolve(args("-X", "tls.enabled=true", "-X", "sasl.mechanism=scram-sha-512",
                              "-X", "sasl.username=u", "-X", "password=p"))  # fmt: skip
    assert (s.security.protocol, s.security.sasl_mechanism, s.security.user, s.security.password) == (
        "SASL_SSL", "SCRAM-SHA-512", "u", "p",
    )  # fmt: skip
    s = settings.resolve(
        args("--tls-cert", "c.pem", "--tls-key", "k.pem", "-X", "tls.insecure_skip_verify=yes")
    )
    assert (s.security.cert, s.security.key, s.security.insecure_skip_verify) == ("c.pem", "k.pem", True)
    s = settings.resolve(args("--sasl-mechanism", "OAUTHBEARER", "--user", "svc"))
    assert (s.security.protocol, s.security.user) == ("SASL_PLAINTEXT", "svc")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["-X", "sasl=1"], "known settings"),
        (["-X", "tls.enabled=maybe"], "expected true or false"),
        (["-X", "timeout=soon"], "not a number of seconds"),
        (["--sasl-mechanism", "GSSAPI", "--user", "u", "--password", "p"], "known mechanisms"),
        (["--sasl-mechanism", "PLAIN", "--user", "u"], "needs --user and --password"),
        (["--user", "u", "--password", "p"], "need --sasl-mechanism"),
        (["--sasl-mechanism", "OAUTHBEARER"], "OAUTHBEARER needs --user"),
        (["--profile", "nope"], "no profile nope"),
    ],
)
def test_bad_settings_are_usage_errors(argv: list[str], message: str) -> None:
    with pytest.raises(FormatError, match=message):
        settings.resolve(args(*argv))


def test_profiles_file_round_trips_with_private_mode(_isolated: Path) -> None:
    profiles = {
        "prod": {"brokers": "a:1,b:2", "tls.enabled": True, "tls.ca": "/x \"q\".pem", "sasl.mechanism": "PLAIN",
                 "user": "u", "pass": "p=1", "timeout": 2.5},
        "dev": {"brokers": "localhost:9092"},
    }  # fmt: skip
    path = settings.save_profiles("prod", profiles)
    assert path == _isolated
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert settings.load_profiles() == ("prod", profiles)
    assert '[profiles."prod".tls]' in path.read_text()


def test_a_stale_current_profile_falls_back_but_a_named_one_must_exist(_isolated: Path) -> None:
    _isolated.parent.mkdir(parents=True)
    _isolated.write_text('current = "gone"\n[profiles.other]\nbrokers = "o:1"\n')
    assert settings.resolve(args()).brokers == "127.0.0.1:9092"
    assert settings.resolve(args("--profile", "other")).brokers == "o:1"
    _isolated.write_text("current = [\n")
    with pytest.raises(FormatError, match="cannot read the profiles file"):
        settings.resolve(args())
