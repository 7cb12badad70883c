"""The broker's side of the group coordinator (kcompat.coordinator is the pure part):
`__consumer_offsets`, deferred answers, timers and rebalance log lines."""
