"""A faust-streaming app with processing_guarantee="exactly_once": every record of the input topic,
upper-cased, into the output topic. Run by compat_tests/test_eco_streams.py with the python of
.deps/eco-venv: `python faust_upper.py BOOTSTRAP INPUT OUTPUT worker`."""

import sys

import faust

bootstrap, source, sink = sys.argv[1:4]
del sys.argv[1:4]  # the rest is faust's command line

app = faust.App(
    "eco-faust",
    broker=f"kafka://{bootstrap}",
    processing_guarantee="exactly_once",
    store="memory://",
    web_enabled=False,
    consumer_auto_offset_reset="earliest",
    topic_replication_factor=1,
    topic_partitions=1,
)
inbound = app.topic(source, key_serializer="raw", value_serializer="raw")
outbound = app.topic(sink, key_serializer="raw", value_serializer="raw")


@app.agent(inbound)
async def upper(stream):  # type: ignore[no-untyped-def]
    async for event in stream.events():
        await outbound.send(key=event.key, value=event.value.upper())


if __name__ == "__main__":
    app.main()
