"""kcompat: a light broker that speaks Apache Kafka's wire protocol."""

__version__ = "0.1.0"
