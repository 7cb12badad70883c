"""The client nouns of the `kcompat` command (`kcompat topic|produce|consume|group|cluster|config|
acl|user|profile|completion ...`).

cli.py registers each noun's parser from here; a noun's module imports the client and the terminal
libraries (rich) only when its command runs, so `kcompat serve` starts as fast as before.

    common.py      connection options, exit codes, one-line errors with hints, tables and JSON output
    settings.py    where a command connects and how (TLS, SASL): profiles file < KCOMPAT_* < -X < flags
    formats.py     pure parsing and formatting: offsets, record format strings, key=value lists
    partitioner.py Kafka's default key partitioner (murmur2), so keyed records land where Java's would
    topic.py  produce.py  consume.py  group.py  cluster.py  config.py  acl.py  user.py  profile.py
    completion.py  one noun each
"""
