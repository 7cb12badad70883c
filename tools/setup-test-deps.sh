#!/usr/bin/env bash
# Installs what compat_tests needs beyond the Python packages:
#   - kcat, chromium and chromium-driver, Go (Debian packages), when they are missing;
#   - Java jars resolved by Maven from Maven Central into .deps/<name>/,
#     one folder per pom under tools/deps/<name>/pom.xml;
#   - pyspark at the release of Spark's Kafka connector in .deps/spark/;
#   - a virtualenv .deps/eco-venv with the ecosystem tests' Python apps (faust-streaming,
#     quixstreams), whose pinned clients conflict with the test extra's.
# Idempotent: a folder whose stamp matches its pom's hash is left alone, so a
# second run takes well under a second. Exits non-zero when anything fails.
#
# `--only kafka` resolves only Apache Kafka's jars (what `kcompat dev-cluster` and the
# cluster fixtures need: Java 17 and Maven), with no Debian packages and no Spark.
set -euo pipefail

ONLY=""
if [ "${1:-}" = "--only" ]; then
    ONLY="${2:?--only needs a name under tools/deps/}"
fi

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEPS="$ROOT/.deps"
POMS="$ROOT/tools/deps"

say() { echo "setup-test-deps: $*"; }
die() { echo "setup-test-deps: ERROR: $*" >&2; exit 1; }

as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        die "need root (or sudo) to run: $*"
    fi
}

APT_UPDATED=0
apt_install() {
    command -v apt-get >/dev/null 2>&1 || die "apt-get not found; install $* by hand"
    if [ "$APT_UPDATED" -eq 0 ]; then
        say "apt-get update"
        as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq || die "apt-get update failed"
        APT_UPDATED=1
    fi
    say "apt-get install $*"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null \
        || die "apt-get install $* failed"
}

if [ -n "$ONLY" ]; then
    [ -f "$POMS/$ONLY/pom.xml" ] || { echo "setup-test-deps: ERROR: no tools/deps/$ONLY/pom.xml" >&2; exit 2; }
fi

# --- system tools -----------------------------------------------------------
if [ -z "$ONLY" ]; then
if command -v kcat >/dev/null 2>&1; then
    say "kcat present ($(command -v kcat))"
else
    apt_install kcat
    command -v kcat >/dev/null 2>&1 || die "kcat still missing after apt-get install"
fi

# Headless Chromium and its WebDriver for the web console's browser tests (compat_tests/test_console_browser.py).
if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
    say "chromium present ($(command -v chromium), $(command -v chromedriver))"
else
    apt_install chromium chromium-driver
    command -v chromedriver >/dev/null 2>&1 || die "chromedriver still missing after apt-get install"
fi

# Go builds the scale-on-cores load generator (benchmarks/loadgen; the cluster suite's slow test
# runs it) and the proxy rows' byte relay (benchmarks/relay), each on first use
# (benchmarks/go_tools.py): any Go >= 1.19 on PATH or in /usr/local/go, else Debian's golang-go.
if command -v go >/dev/null 2>&1 || [ -x /usr/local/go/bin/go ] || [ -x /usr/lib/go/bin/go ]; then
    say "go present"
else
    apt_install golang-go
    command -v go >/dev/null 2>&1 || die "go still missing after apt-get install golang-go"
fi

if ! command -v java >/dev/null 2>&1; then
    apt_install openjdk-17-jre-headless
fi
if ! command -v mvn >/dev/null 2>&1; then
    apt_install maven
fi
fi  # not --only

# --- Java jars --------------------------------------------------------------
pom_hash() { sha256sum "$1" | cut -d' ' -f1; }

resolve() {
    local name="$1" pom="$POMS/$1/pom.xml" dest="$DEPS/$1"
    local want stamp_file tmp
    want="$(pom_hash "$pom")"
    stamp_file="$dest/.stamp"
    if [ -f "$stamp_file" ] && [ "$(cat "$stamp_file")" = "$want" ] && compgen -G "$dest/*.jar" >/dev/null; then
        say "$name: up to date ($(find "$dest" -maxdepth 1 -name '*.jar' | wc -l) jars)"
        return 0
    fi
    say "$name: resolving from Maven Central (tools/deps/$name/pom.xml)"
    mkdir -p "$DEPS"
    tmp="$(mktemp -d "$DEPS/.$name.XXXXXX")"
    # A failed resolution leaves the previous folder as it was.
    if ! mvn -B -q -f "$pom" dependency:copy-dependencies \
            -DincludeScope=runtime -DoutputDirectory="$tmp" >"$tmp.log" 2>&1; then
        cat "$tmp.log" >&2
        rm -rf "$tmp" "$tmp.log"
        die "$name: mvn dependency:copy-dependencies failed"
    fi
    rm -f "$tmp.log"
    compgen -G "$tmp/*.jar" >/dev/null || { rm -rf "$tmp"; die "$name: Maven resolved no jars"; }
    echo "$want" >"$tmp/.stamp"
    rm -rf "$dest"
    mv "$tmp" "$dest"
    say "$name: $(find "$dest" -maxdepth 1 -name '*.jar' | wc -l) jars in .deps/$name/"
}

if [ -n "$ONLY" ]; then
    command -v mvn >/dev/null 2>&1 || die "mvn not found: install Java 17 and Maven first"
    resolve "$ONLY"
    say "done"
    exit 0
fi
for pom in "$POMS"/*/pom.xml; do
    resolve "$(basename "$(dirname "$pom")")"
done

# --- Spark ------------------------------------------------------------------
# Spark's Kafka connector (.deps/spark/, resolved above) is built against one
# Spark release, so pyspark must be that same release: tools/deps/spark/pom.xml
# names it, and a different installed pyspark is replaced by it.
SPARK_VERSION="$(sed -n 's:.*<spark.version>\(.*\)</spark.version>.*:\1:p' "$POMS/spark/pom.xml")"
[ -n "$SPARK_VERSION" ] || die "spark: no <spark.version> in tools/deps/spark/pom.xml"
if [ -x "$ROOT/.venv/bin/python" ]; then PYTHON="$ROOT/.venv/bin/python"; else PYTHON="${PYTHON:-python3}"; fi
pyspark_version() {
    "$PYTHON" -c 'import importlib.metadata as m; print(m.version("pyspark"))' 2>/dev/null || true
}
have="$(pyspark_version)"
if [ "$have" = "$SPARK_VERSION" ]; then
    say "spark: pyspark $have matches the connector"
else
    say "spark: pyspark ${have:-missing}, the connector needs $SPARK_VERSION; pip install pyspark==$SPARK_VERSION"
    "$PYTHON" -m pip install -q "pyspark==$SPARK_VERSION" || die "spark: pip install pyspark==$SPARK_VERSION failed"
    [ "$(pyspark_version)" = "$SPARK_VERSION" ] || die "spark: pyspark is still not $SPARK_VERSION"
fi
[ -f "$DEPS/spark/spark-sql-kafka-0-10_2.13-$SPARK_VERSION.jar" ] \
    || die "spark: .deps/spark/ lacks spark-sql-kafka-0-10_2.13-$SPARK_VERSION.jar"

# --- the ecosystem's Python apps -------------------------------------------
# faust-streaming and quixstreams pin client libraries that conflict with the test extra's, so
# they get a virtualenv of their own; compat_tests/test_eco_streams.py runs its apps with that
# venv's python. Remade only when tools/deps/eco-venv/requirements.txt changes.
ECO_REQS="$POMS/eco-venv/requirements.txt"
ECO_VENV="$DEPS/eco-venv"
eco_want="$(sha256sum "$ECO_REQS" | cut -d' ' -f1)"
if [ -f "$ECO_VENV/.stamp" ] && [ "$(cat "$ECO_VENV/.stamp")" = "$eco_want" ] && [ -x "$ECO_VENV/bin/python" ]; then
    say "eco-venv: up to date"
else
    say "eco-venv: python -m venv .deps/eco-venv; pip install -r tools/deps/eco-venv/requirements.txt"
    rm -rf "$ECO_VENV"
    "${ECO_PYTHON:-python3}" -m venv "$ECO_VENV" || die "eco-venv: python3 -m venv failed (Debian: apt-get install python3-venv)"
    "$ECO_VENV/bin/python" -m pip install -q --upgrade pip || die "eco-venv: pip upgrade failed"
    "$ECO_VENV/bin/python" -m pip install -q -r "$ECO_REQS" || die "eco-venv: pip install failed"
    echo "$eco_want" >"$ECO_VENV/.stamp"  # last: a failed install is redone on the next run
fi

say "done"
