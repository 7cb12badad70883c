"""Client telemetry (KIP-714): what clients push and which subscriptions they get, without I/O."""
