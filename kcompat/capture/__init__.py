"""Traffic capture: what clients sent and got, as JSON lines or record by record, for tests.

Independent of the broker: any front that sees Kafka requests and their answers (`kcompat serve`'s
dispatcher through kcompat/server/capture_hook.py; the proxy's connection) offers each exchange:

    engine = CaptureEngine(log_dir=Path(...), topic_name=by_id)   # one per process
    cid = engine.start(spec_from_json({...}))      # CaptureError (a ValueError) on a bad capture
    if engine.on:                                  # nothing running: skip everything (zero cost)
        engine.observe(Exchange(RequestFacts(api_key, version, client_id, principal=...,
                                             peer=host, broker=node_id, body=decoded_request),
                                correlation_id,
                                response=lambda: decoded_response_body_or_None,
                                started=time.time(), elapsed=seconds))
    engine.records(cid, since=0) / listing() / stop(cid) / remove(cid) / clear()  # the HTTP verbs

`response` is called at most once and only when a capture matched; a front with the answer's
bytes decodes them with kcompat.wire.protocol.decode_response (bodies.frame_bytes joins a
broker's chunks, file slices read). Matching uses kcompat.faults' matchers (spec.py for the JSON
form). A `log` capture's lines are written by a thread through a bounded queue that drops (and
counts) rather than wait; `records` captures are kept in memory up to max_records. Replay of a
captured produce stream: replay.py.
"""

from kcompat.capture.engine import CaptureEngine, Exchange
from kcompat.capture.spec import CaptureError, CaptureSpec, spec_from_json, spec_to_json

__all__ = ["CaptureEngine", "CaptureError", "CaptureSpec", "Exchange", "spec_from_json", "spec_to_json"]
