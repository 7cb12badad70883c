"""The only code that touches sockets, tasks and timers.

Two halves meet at one small interface:

- the transport (`app.py`, `connection.py`, `sendfile.py`): listeners, one protocol object per
  connection, 4-byte size-prefixed framing checked against socket.request.max.bytes, requests of
  one connection handled in order (a Produce may go ahead of an earlier one's answer, which
  still goes out first: `answer_queue.py`) while connections proceed concurrently, backpressure,
  idle and connection limits, zero-copy writes of file slices, graceful shutdown;
- the broker (`broker.py`, which only wires the parts and runs their life cycle): the request
  dispatcher (`dispatcher.py`), the metadata view (`metadata_view.py`, one node's `local_metadata.py`), the replica manager
  (`replica_manager.py`: logs and parked fetches), the group service, and one handler per API
  (`handlers/`), registered in `registry.py` with the versions it implements. ARCHITECTURE.md at
  the repository root draws them.

    broker = Broker(config)                      # kcompat.server.broker
    await broker.start()
    chunks = await broker.handle(frame, client)  # frame: request bytes without the size prefix
        # -> list of chunks (bytes, or file slices to send with sendfile), size prefix included,
        #    or None when no response is due (Produce with acks=0), or a future of either (an
        #    acks=all Produce in cluster mode waiting for the ISR)
        # raises CloseConnection(reason) when Kafka would close the connection
    await broker.close()                         # flush and close logs cleanly
"""
