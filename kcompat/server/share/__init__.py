"""Share groups (KIP-932) on the broker: share-partition state, share sessions, the persister."""
