"""A Spark application (run in its own process by test_delegation_token_read.py) whose Kafka reads
authenticate with a delegation token that Spark's own KafkaDelegationTokenProvider obtained.

Its own JVM, because the cluster settings (`spark.kafka.clusters.<id>.*`) are read from the
SparkConf the context started with, and the token lives in the JVM's current Hadoop user
(UserGroupInformation), which would otherwise leak into every later Spark test.

    python token_read_app.py <sasl bootstrap> <alice's password> <topic> <jar>,<jar>...

Prints one JSON object a line: {"step": ..., ...}.
"""

from __future__ import annotations

import json
import os
import re
import sys
from typing import Any

CLUSTER = "kc"
PREFIX = f"spark.kafka.clusters.{CLUSTER}."


def emit(step: str, **fields: Any) -> None:
    print(json.dumps({"step": step, **fields}), flush=True)


def main(bootstrap: str, password: str, topic: str, jars: str) -> None:
    from pyspark.sql import SparkSession

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    login = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="alice" password="{password}";'
    )
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("kcompat-spark-delegation-token")
        .config("spark.jars", jars)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        # Spark's delegation-token settings for one Kafka cluster, as its documentation gives them;
        # the admin client that asks for the token logs in as alice with SCRAM (the `kafka.*` ones).
        .config(PREFIX + "auth.bootstrap.servers", bootstrap)
        .config(PREFIX + "target.bootstrap.servers.regex", re.escape(bootstrap))
        .config(PREFIX + "security.protocol", "SASL_PLAINTEXT")
        .config(PREFIX + "sasl.token.mechanism", "SCRAM-SHA-512")
        .config(PREFIX + "kafka.sasl.mechanism", "SCRAM-SHA-512")
        .config(PREFIX + "kafka.sasl.jaas.config", login)
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    jvm = spark.sparkContext._jvm
    conf = jvm.org.apache.spark.SparkEnv.get().conf()
    hadoop_conf = spark.sparkContext._jsc.hadoopConfiguration()
    ugi = jvm.org.apache.hadoop.security.UserGroupInformation

    # Spark's token manager: it has the Kafka provider but, without Kerberos, obtains nothing.
    manager = jvm.org.apache.spark.deploy.security.HadoopDelegationTokenManager(conf, hadoop_conf, None)
    creds = jvm.org.apache.hadoop.security.Credentials()
    manager.obtainDelegationTokens(creds)
    emit(
        "manager",
        security_enabled=ugi.isSecurityEnabled(),
        kafka_provider_loaded=manager.isProviderLoaded("kafka"),
        tokens=creds.numberOfTokens(),
    )

    # What the manager would do with Kerberos: Spark's Kafka provider asks for the token ...
    provider = jvm.org.apache.spark.kafka010.KafkaDelegationTokenProvider()
    creds = jvm.org.apache.hadoop.security.Credentials()
    provider.obtainDelegationTokens(hadoop_conf, conf, creds)
    token = creds.getToken(jvm.org.apache.hadoop.io.Text(f"kafka.server.delegation.token.{CLUSTER}"))
    if token is None:
        emit("provider", token_id=None)
        return
    token_id = bytes(token.getIdentifier()).decode()
    hmac = bytes(token.getPassword()).decode()
    emit("provider", token_id=token_id, kind=token.getKind().toString())
    # ... and the driver hands it to the executors' user; in local mode they share this JVM's.
    ugi.getCurrentUser().addCredentials(creds)

    def read() -> list[tuple[str, str, int]]:
        rows = (
            spark.read.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)  # no security option: the token's
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .load()
            .select("key", "value", "partition")
            .collect()
        )
        return sorted((bytes(r.key).decode(), bytes(r.value).decode(), r.partition) for r in rows)

    emit("read", rows=read())

    # The token removed (alice's admin client), a new read has nothing to log in with.
    admin_props = jvm.java.util.Properties()
    admin_props.put("bootstrap.servers", bootstrap)
    admin_props.put("security.protocol", "SASL_PLAINTEXT")
    admin_props.put("sasl.mechanism", "SCRAM-SHA-512")
    admin_props.put("sasl.jaas.config", login)
    admin = jvm.org.apache.kafka.clients.admin.Admin.create(admin_props)
    try:
        described = admin.describeDelegationToken().delegationTokens().get()
        emit(
            "describe",
            tokens=[
                {"id": t.tokenInfo().tokenId(), "owner": t.tokenInfo().owner().toString()} for t in described
            ],
        )
        options = jvm.org.apache.kafka.clients.admin.ExpireDelegationTokenOptions().expiryTimePeriodMs(-1)
        raw_hmac = jvm.java.util.Base64.getDecoder().decode(hmac)
        admin.expireDelegationToken(raw_hmac, options).expiryTimestamp().get()
    finally:
        admin.close()
    try:
        emit("reread", rows=read())
    except Exception as exc:  # the Java exception chain as Spark raises it
        emit("reread", error=str(exc)[:4000])
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:5])
