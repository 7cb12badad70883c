"""Client quotas as values: entities, validation, Kafka's precedence, and the windowed rate.

Pure (no I/O, no clock): the server's quota managers (kcompat.server.quotas) pass the time in.
"""
