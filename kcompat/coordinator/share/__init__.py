"""Share groups (KIP-932), pure: share-partition record states and the share group."""
