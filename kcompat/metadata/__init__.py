"""KRaft broker metadata, sans IO, under Kafka's names.

* broker_lifecycle.py  BrokerLifecycleManager: registration and heartbeat state machine
* records.py           the `__cluster_metadata` record frame and its 26 record types
* image.py             MetadataImage (the cluster at an offset) and MetadataDelta (records on top)
* loader.py            MetadataLoader: fetched batches in, images out, only up to the high watermark

The server drives these with bytes and time; nothing here touches a socket, a file or a clock.
"""
