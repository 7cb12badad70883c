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
)
inbound = app.topic(source, key_deserializer="bytes", value_deserializer="bytes")
outbound = app.topic(sink, key_serializer="bytes", value_serializer="bytes")
app.dataframe(inbound).apply(lambda value: value.upper()).to_topic(outbound)

if __name__ == "__main__":
    app.run()
