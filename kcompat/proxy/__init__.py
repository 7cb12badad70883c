"""`kcompat proxy`: a Kafka-protocol proxy in front of any Kafka cluster (issue 27).

A bootstrap listener and one listener per upstream node id (port `base + node id`); every answer
that names a node is rewritten to the proxy's own endpoints (node_fields.py says which, from the
schemas), every other frame is relayed as received.
"""
