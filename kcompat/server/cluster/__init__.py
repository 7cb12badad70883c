"""Cluster mode: this process as a KRaft broker under Kafka's controllers.

Registration and heartbeats, the metadata image as the MetadataView, requests forwarded to the
controller, producer-id blocks, coordinator shards that follow the leadership of their state
topics, and the transaction coordinator's channels to other brokers. `replication/` holds the
partitions this broker hosts, leader or follower. Nothing outside this package imports it but the
one assembly point that builds cluster mode's collaborators (`assembly.py`, imported by the broker
only in cluster mode); a single node never loads it.
"""
