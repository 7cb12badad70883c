"""Helpers shared by the crash, fault, fuzz and limit tests (issue 8): acknowledged-record ledgers,
reading a topic back, a raw wire client, and the broker's memory from /proc."""
