"""A small blocking Kafka client built on kcompat.wire, for the `kcompat` command-line tools.

    connection.py   one socket to one broker: ApiVersions negotiation, request -> decoded response
    cluster.py      bootstrap, Metadata, leaders and group coordinators, a connection per broker
    errors.py       KafkaError (a Kafka error code with context) and CannotConnect
    admin.py        topics, configs, partitions, DeleteRecords, DescribeLogDirs
    offsets.py      ListOffsets: start, end and by-timestamp offsets per partition
    records.py      Produce and Fetch of record batches
    groups.py       ListGroups, DescribeGroups, OffsetFetch/OffsetCommit, DeleteGroups

It speaks to any Kafka-compatible broker (kcompat or Apache Kafka); it is no replacement for a
production client (no retries beyond leader lookups, no pipelining), it is what a human at a
terminal needs.
"""
