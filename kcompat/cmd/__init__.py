"""The client nouns of the `kcompat` command (`kcompat topic|produce|consume|group|cluster ...`).

cli.py registers each noun's parser from here; a noun's module imports the client and the terminal
libraries (rich) only when its command runs, so `kcompat serve` starts as fast as before.

    common.py      connection options, exit codes, one-line errors, tables and JSON output
    formats.py     pure parsing and formatting: offsets, record format strings, key=value lists
    partitioner.py Kafka's default key partitioner (murmur2), so keyed records land where Java's would
    topic.py  produce.py  consume.py  group.py  cluster.py   one noun each
"""
