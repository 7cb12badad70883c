"""Authorization: ACLs and the decision on them (pure: no I/O, no clock)."""
