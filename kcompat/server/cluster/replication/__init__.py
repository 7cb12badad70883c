"""Replication in cluster mode (Kafka's Partition, ReplicaFetcherThread, AlterPartitionManager):
one Partition per hosted replica, the high-watermark and ISR rules, followers' fetchers, and the
metadata image applied to the replicas."""
