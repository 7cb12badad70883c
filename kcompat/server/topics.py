"""Transitional: the topic names and TopicInfo moved to kcompat.storage.topic_store (re-exported
here for handler modules being rewritten concurrently; import from kcompat.storage.topic_store)."""

from kcompat.storage.topic_store import CONSUMER_OFFSETS, INTERNAL_TOPICS, TRANSACTION_STATE, TopicInfo

__all__ = ["CONSUMER_OFFSETS", "INTERNAL_TOPICS", "TRANSACTION_STATE", "TopicInfo"]
