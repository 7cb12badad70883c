"""The broker's side of the transaction coordinator (kcompat.coordinator.transaction is the pure
part): `__transaction_state`, markers and timers."""
