"""A quixstreams app with processing_guarantee="exactly-once": every record of the input topic,
upper-cased, into the output topic. Run by compat_tests/test_eco_streams.py with the python of
.deps/eco-venv: `python quix_upper.py BOOTSTRAP INPUT OUTPUT STATE_DIR`."""

import sys

from quixstreams import Application

bootstrap, source, sink, state_dir = sys.argv[1:5]

app = Application(
    broker_address=bootstrap,
    consumer_group="eco-quix",
    processing_guarantee="exactly-once",
    auto_offset_reset="earliest",
    state_dir=state_dir,
    # A fixed transactional.id (quixstreams draws a new one each start): the restarted app fences
    # a killed one and its open transaction is aborted at once, not after transaction.timeout.ms.
    producer_extra_config={"transactional.id": "eco-quix-upper"},
    # ... and it gets the partition back without waiting out the killed one's session (45 s).
    consumer_extra_config={"session.timeout.ms": 6000, "heartbeat.interval.ms": 1000},
)
inbound = app.topic(source, key_deserializer="bytes", value_deserializer="bytes")
outbound = app.topic(sink, key_serializer="bytes", value_serializer="bytes")
app.dataframe(inbound).apply(lambda value: value.upper()).to_topic(outbound)

if __name__ == "__main__":
    app.run()
