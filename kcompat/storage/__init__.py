"""The files a single broker keeps its cluster metadata in, in place of Kafka's KRaft metadata log:

- `topic_store.py`: `kcompat-topics.json` (topics, topic ids, partition counts, config overrides,
  leader epochs, dynamic broker configs), rewritten whole and atomically on every change;
- `producer_id_store.py`: `kcompat-producer-ids`, the end of the block of producer ids reserved.

Storage side: this package never imports kcompat.server (tools/check_imports.py enforces it). The
server reads these through its metadata interface (kcompat/server/metadata_view.py).
"""
