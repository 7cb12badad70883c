"""The HTTP admin pieces `kcompat serve` and `kcompat proxy` share: the h11 server (http_server.py)
and the JSON APIs of the fault rules (faults.py) and traffic captures (captures.py). Neither
front is imported here: each hands in its own engines and routes."""
