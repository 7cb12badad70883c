"""KRaft broker metadata, sans IO: the lifecycle state machine and the `__cluster_metadata` image.

Kafka's names: BrokerLifecycleManager (broker_lifecycle.py). The server drives these with bytes
and time; nothing here touches a socket, a file or a clock.
"""
