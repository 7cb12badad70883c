"""Smoke test of the test set-up: the Kafka jars, the Java client jars and kcat are installed and
each tool's main class starts."""

from __future__ import annotations

import re
import subprocess
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import pytest
from support import KAFKA_CLIENTS_39_JARS, KAFKA_JARS, KAFKA_TOOLS, ROOT, kafka_tool, kcat_executable

POM_NS = {"m": "http://maven.apache.org/POM/4.0.0"}


def pom_property(pom: Path, name: str) -> str:
    element = ET.parse(pom).getroot().find(f"m:properties/m:{name}", POM_NS)
    assert element is not None and element.text, f"{pom} has no <{name}>"
    return element.text.strip()


KAFKA_VERSION = pom_property(ROOT / "tools/deps/kafka/pom.xml", "kafka.version")

# How to make each tool say who it is and exit: (arguments, exit code, text expected in the output).
# The argparse4j-based tools have no --version ("unrecognized arguments"): their usage text instead,
# with the exit code each gives after --help (as Kafka 4.3.1's own tools do).
PROBES: dict[str, tuple[tuple[str, ...], int, str]] = {
    "kafka-cluster": (("--help",), 1, "usage: kafka-cluster"),
    "kafka-features": (("--help",), 0, "usage: kafka-features"),
    "kafka-metadata-quorum": (("--help",), 0, "usage: kafka-metadata-quorum"),
    "kafka-producer-perf-test": (("--help",), 1, "usage: kafka-producer-perf-test"),
    "kafka-storage": (("--help",), 0, "usage: kafka-storage"),
    "kafka-verifiable-share-consumer": (("--help",), 1, "usage: verifiable-share-consumer"),
}


@pytest.mark.parametrize("tool", sorted(KAFKA_TOOLS))
def test_kafka_tool_starts(tool: str) -> None:
    args, code, expected = PROBES.get(tool, (("--version",), 0, KAFKA_VERSION))
    result = kafka_tool(tool, *args, check=False, timeout=90)
    output = result.stdout + result.stderr
    assert result.returncode == code, f"{tool} exited {result.returncode}:\n{output[-2000:]}"
    assert expected in output, f"{tool}: {expected!r} not in output:\n{output[-2000:]}"
    assert "ClassNotFoundException" not in output and "NoClassDefFoundError" not in output


def jar_version(folder: Path, artifact: str) -> str:
    (jar,) = folder.glob(f"{artifact}-*.jar")
    with zipfile.ZipFile(jar) as z:
        props = z.read("kafka/kafka-version.properties").decode()
    return dict(line.split("=", 1) for line in props.splitlines() if "=" in line)["version"]


def test_kafka_jars_match_the_pom() -> None:
    assert jar_version(KAFKA_JARS, "kafka-clients") == KAFKA_VERSION


def test_java_client_39_jars() -> None:
    expected = pom_property(ROOT / "tools/deps/kafka-clients-3.9/pom.xml", "kafka-clients.version")
    assert expected.startswith("3.9.")
    assert jar_version(KAFKA_CLIENTS_39_JARS, "kafka-clients") == expected
    names = {re.sub(r"-[0-9].*$", "", p.name) for p in KAFKA_CLIENTS_39_JARS.glob("*.jar")}
    assert {"kafka-clients", "slf4j-api", "slf4j-simple", "zstd-jni", "lz4-java", "snappy-java"} <= names


def test_kcat_runs() -> None:
    result = subprocess.run([kcat_executable(), "-V"], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0
    assert "kcat" in result.stdout and "librdkafka" in result.stdout
