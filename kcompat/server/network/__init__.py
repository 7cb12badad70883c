"""The transport: listening sockets, connections, framing, in-order answers, zero-copy writes, TLS.

It knows nothing of Kafka's APIs: a connection hands each frame to the callable it was given
(`Broker.handle`) and writes back the chunks it gets. Imports no handler, group, transaction or
cluster module.
"""
