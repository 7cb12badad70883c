"""Security decisions as values (pure: no I/O, no clock): the ACLs and the Authorizer's decision on
them (authorizer.py), and one connection's SASL exchange as a state table (sasl_exchange.py)."""
