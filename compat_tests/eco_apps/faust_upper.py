"""A faust-streaming app with processing_guarantee="exactly_once": every record of the input topic,
upper-cased, into the output topic. Run by compat_tests/test_eco_streams.py with the python of
.deps/eco-venv: `python faust_upper.py BOOTSTRAP INPUT OUTPUT WEB_PORT worker`."""

import sys

import faust

bootstrap, source, sink, web_port = sys.argv[1:5]
del sys.argv[1:5]  # the rest is faust's command line

app = faust.App(
    "eco-faust",
    broker=f"kafka://{bootstrap}",
    processing_guarantee="exactly_once",
    store="memory://",
    # The worker starts its web server all the same: on loopback, on a free port.
    web_enabled=False,
    web_bind="127.0.0.1",
    web_port=int(web_port),
    consumer_auto_offset_reset="earliest",
    topic_replication_factor=1,
    topic_partitions=1,
    # A restarted worker gets the partition back without waiting out a killed one's session
    # (60 s by default); its transactional ids are its own fixed ones, so it fences the killed one.
    broker_session_timeout=6.0,
    broker_heartbeat_interval=1.0,
)
inbound = app.topic(source, key_serializer="raw", value_serializer="raw")
outbound = app.topic(sink, key_serializer="raw", value_serializer="raw")


@app.agent(inbound)
async def upper(stream):  # type: ignore[no-untyped-def]
    async for event in stream.events():
        await outbound.send(key=event.key, value=event.value.upper())


if __name__ == "__main__":
    app.main()
