"""Fault injection: rules that make a broker (or the proxy) misbehave on purpose, for tests.

Pure: rules are typed data (rules.py, with their JSON form), matched and fired by the engine
(engine.py) with its triggers as a table (triggers.py); no I/O, no clock, seeded randomness. What
a fault does to the bytes is here too (error_response.py: a typed error answer for any API;
answers.py: a duplicated or corrupted answer); waiting and closing are the caller's.

The interface, for any front that sees Kafka requests (`kcompat serve`'s dispatcher,
kcompat/server/fault_hook.py; the proxy's connection):

    engine = FaultEngine()                       # one per process; rules added at run time
    engine.add(rule_from_json({...}))            # RuleError (a ValueError) on a bad rule
    if engine.armed:                             # nothing set: skip everything (zero cost)
        verdict = engine.decide(RequestFacts(api_key, api_version, client_id,
                                             principal=..., peer=host, broker=node_id,
                                             body=decoded_body_or_None, topic_name=by_id))
        # verdict None: serve as usual. Otherwise verdict.action.kind, and .when (before the
        # request goes on / after its answer came back):
        #   error      answer error_response(api_key, version, body, action.error, text)
        #              (acks=0 Produce: close instead, there is no answer to give)
        #   delay      sleep action.delay_ms, then go on (or hold the answer that long)
        #   drop       close the client's connection (after: once the request was served)
        #   blackhole  / partition: never answer (keep the connection open; answers after it
        #              wait behind it, as a client expects answers in order)
        #   throttle   hold each answer engine.throttle_delay(verdict.rule_id, size, now) s
        #   duplicate  send duplicate(chunks);  corrupt: send corrupt(chunks)
        engine.listing() / replace(id, rule) / remove(id) / clear()  # the HTTP API's verbs
        engine.fired_by_action, engine.rules[id].fired             # counters for /metrics

`body` may be None when a front does not decode (matching by topic, partition, group or
transactional id then never matches); `topic_name` resolves the topic ids of Fetch/Produce v13+.
"""

from kcompat.faults.answers import corrupt, duplicate
from kcompat.faults.engine import FaultEngine, Verdict
from kcompat.faults.error_response import error_response
from kcompat.faults.facts import RequestFacts
from kcompat.faults.rules import Action, Match, Rule, RuleError, Trigger, rule_from_json, rule_to_json

__all__ = [
    "Action",
    "FaultEngine",
    "Match",
    "RequestFacts",
    "Rule",
    "RuleError",
    "Trigger",
    "Verdict",
    "corrupt",
    "duplicate",
    "error_response",
    "rule_from_json",
    "rule_to_json",
]
