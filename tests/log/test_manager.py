"""LogManager: meta.properties, checkpoint files, clean-shutdown marker, topic lifecycle."""

from __future__ import annotations

import json
import os
import time

import pytest

from kcompat.log import InconsistentClusterId, LogConfig, LogManager
from kcompat.log.manager import LEFT_SYNCING, read_properties
from tests.log.batches import batch


def test_meta_properties_as_kafka_writes_them(tmp_path):
    m = LogManager(
        [tmp_path / "a", tmp_path / "b"], LogConfig(), cluster_id="MkU3OEVBNTcwNTJENDM2Qk", node_id=3
    )
    props = read_properties(tmp_path / "a" / "meta.properties")
    assert props["cluster.id"] == "MkU3OEVBNTcwNTJENDM2Qk"
    assert props["node.id"] == "3" and props["version"] == "1"
    assert len(props["directory.id"]) == 22  # a base64 Uuid
    assert props["directory.id"] != read_properties(tmp_path / "b" / "meta.properties")["directory.id"]
    m.close()
    again = LogManager(
        [tmp_path / "a", tmp_path / "b"], LogConfig(), cluster_id="MkU3OEVBNTcwNTJENDM2Qk", node_id=3
    )
    assert again.directory_ids[tmp_path / "a"] == props["directory.id"]  # kept across restarts
    with pytest.raises(InconsistentClusterId):
        LogManager([tmp_path / "a"], LogConfig(), cluster_id="other", node_id=3)


def test_a_first_start_on_an_empty_dir_syncs_only_its_identity(tmp_path, monkeypatch):
    """A new broker's first start: meta.properties is made durable (file and dir), the empty
    checkpoints need no fsync (lost, they read as missing: the same) and there is nothing to recover,
    so no syncfs of the whole filesystem either. With a partition, a crash-restart syncs both
    (the recovery point and log start offset checkpoints, each file and its dir)."""
    from kcompat.log import log_files

    synced: list[str] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append("fsync"), real_fsync(fd))[1])
    monkeypatch.setattr(log_files, "sync_filesystem", lambda d: synced.append("syncfs"))
    monkeypatch.setattr("kcompat.log.manager.sync_filesystem", lambda d: synced.append("syncfs"))
    LogManager([tmp_path], LogConfig(), cluster_id="c", node_id=1, clock=lambda: 0)
    assert synced == ["fsync", "fsync"]  # meta.properties and its dir
    crashed = LogManager([tmp_path], LogConfig(), cluster_id="c", node_id=1, clock=lambda: 0)
    crashed.get_or_create("orders", 0).append(batch(3), leader_epoch=0, now_ms=0)
    synced.clear()
    LogManager([tmp_path], LogConfig(), cluster_id="c", node_id=1, clock=lambda: 0)  # no clean marker
    assert synced[0] == "syncfs" and synced.count("fsync") >= 4  # recovery written back, checkpoints durable


def test_checkpoints_and_marker(tmp_path):
    m = LogManager([tmp_path], LogConfig(), cluster_id="c", node_id=1, clock=lambda: 0)
    a = m.get_or_create("orders", 0)
    b = m.get_or_create("orders", 1)
    a.append(batch(10), leader_epoch=0, now_ms=0)
    b.append(batch(4), leader_epoch=0, now_ms=0)
    a.delete_records_before(6)
    m.close()
    assert (tmp_path / "recovery-point-offset-checkpoint").read_text() == "0\n2\norders 0 10\norders 1 4\n"
    assert (tmp_path / "log-start-offset-checkpoint").read_text() == "0\n2\norders 0 6\norders 1 0\n"
    assert json.loads((tmp_path / ".kafka_cleanshutdown").read_text())["version"] == 0
    m2 = LogManager([tmp_path], LogConfig(), cluster_id="c", node_id=1, clock=lambda: 0)
    assert m2.partitions() == [("orders", 0), ("orders", 1)]
    assert m2.get("orders", 0).log_start_offset == 6
    assert m2.get("orders", 0).log_end_offset == 10


def test_delete_topic_removes_its_directories(tmp_path):
    m = LogManager([tmp_path], LogConfig(), cluster_id="c", node_id=1, clock=lambda: 0)
    for p in range(3):
        m.get_or_create("gone", p).append(batch(1), leader_epoch=0, now_ms=0)
    m.get_or_create("kept", 0)
    assert m.delete("gone") == 3
    assert sorted(x.name for x in tmp_path.iterdir() if x.is_dir()) == ["kept-0"]
    assert "gone" not in (tmp_path / "recovery-point-offset-checkpoint").read_text()


def test_delete_one_partition_of_a_topic_keeps_the_others_and_the_topic_config(tmp_path):
    """A replica moved off this broker: only its directory goes (the topic lives on elsewhere)."""
    m = LogManager([tmp_path], LogConfig(), cluster_id="c", node_id=1, clock=lambda: 0)
    config = LogConfig(retention_ms=1234)
    for p in range(2):
        m.get_or_create("moved", p, config).append(batch(1), leader_epoch=0, now_ms=0)
    assert m.delete("moved", 1) == 1
    assert sorted(x.name for x in tmp_path.iterdir() if x.is_dir()) == ["moved-0"]
    assert m.partitions() == [("moved", 0)] and m.config_for("moved") == config
    assert "moved 1" not in (tmp_path / "recovery-point-offset-checkpoint").read_text()
    assert m.delete("moved", 0) == 1 and m.config_for("moved") == LogConfig()


def test_stray_log_is_moved_aside_kept_and_not_loaded_again(tmp_path, caplog):
    """Kafka 4.x: a log the metadata assigns elsewhere is renamed `<topic>-<p>.<uuid>-stray`, never deleted."""
    m = LogManager([tmp_path], LogConfig(), cluster_id="c", node_id=1, clock=lambda: 0)
    for p in range(2):
        m.get_or_create("moved", p).append(batch(3), leader_epoch=0, now_ms=0)
    stray = m.mark_stray("moved", 0)
    assert m.mark_stray("moved", 0) is None
    assert stray is not None and stray.parent == tmp_path
    assert stray.name.startswith("moved-0.") and stray.name.endswith("-stray") and len(stray.name) == 46
    assert any(stray.glob("*.log")) and not (tmp_path / "moved-0").exists()
    assert m.partitions() == [("moved", 1)]
    assert "moved 0" not in (tmp_path / "recovery-point-offset-checkpoint").read_text()
    m.close()
    with caplog.at_level("WARNING", logger="kcompat.log"):
        m2 = LogManager([tmp_path], LogConfig(), cluster_id="c", node_id=1, clock=lambda: 0)
    assert m2.partitions() == [("moved", 1)] and stray.is_dir()
    assert f"loaded stray log: {stray}" in caplog.text
    assert m2.get_or_create("moved", 0).log_end_offset == 0  # assigned here again: a new, empty log
    long = "t" * 249
    assert m2.mark_stray(long, 0) is None  # nothing hosted under that name
    m2.get_or_create(long, 0)
    cut = m2.mark_stray(long, 0)
    assert (
        cut is not None and len(cut.name) == 255 and cut.name.startswith("t" * 214 + "-0.")
    )  # as Kafka cuts it


def test_maintenance_applies_retention_with_topic_config(tmp_path):
    m = LogManager([tmp_path], LogConfig(), cluster_id="c", node_id=1, clock=lambda: 0)
    plog = m.get_or_create("short", 0, LogConfig(retention_ms=100, segment_bytes=500))
    for i in range(20):
        plog.append(batch(2, timestamp=i), leader_epoch=0, now_ms=0)
    m.run_maintenance(now_ms=10_000)
    assert plog.log_start_offset == plog.log_end_offset
    assert (tmp_path / "log-start-offset-checkpoint").read_text().endswith(f"short 0 {plog.log_end_offset}\n")


RECOVERY_WORDS = ("not shut down cleanly", "rebuilding the indexes", "truncated")


def open_manager(d):
    return LogManager([d], LogConfig(), cluster_id="c", node_id=1, clock=lambda: 0)


def inodes(part):
    return {p.name: p.stat().st_ino for p in part.iterdir()}


def test_a_clean_stop_writes_only_what_the_next_start_needs_and_that_start_recovers_nothing(tmp_path, caplog):
    """Per partition, a clean stop creates only files whose contents the next start cannot do
    without: the epoch checkpoint of an epoch records carry, a producer snapshot where there is
    producer state. No index file without entries, no closing time index entry, no snapshot of an
    empty state; the next start recovers nothing and has every record, the producer state (a
    retried batch is a duplicate), the epochs and the largest timestamp."""
    m = open_manager(tmp_path)
    plain = m.get_or_create("t", 0)
    plain.leader_epoch_cache.assign(3, 0, write=False)  # as a partition becoming leader does
    plain.append(bytearray(batch(3, timestamp=5_000)), leader_epoch=3, now_ms=0)
    idem = m.get_or_create("t", 1)
    idem.leader_epoch_cache.assign(3, 0, write=False)
    retried = batch(2, producer_id=7, producer_epoch=0, base_sequence=0)
    idem.append(bytearray(retried), leader_epoch=3, now_ms=0)
    idle = m.get_or_create("t", 2)
    idle.leader_epoch_cache.assign(3, 0, write=False)  # leader, but no record in its epoch
    m.close()
    assert sorted(os.listdir(tmp_path / "t-0")) == ["00000000000000000000.log", "leader-epoch-checkpoint"]
    assert sorted(os.listdir(tmp_path / "t-1")) == [
        "00000000000000000000.log", "00000000000000000002.snapshot", "leader-epoch-checkpoint",
    ]  # fmt: skip
    assert os.listdir(tmp_path / "t-2") == ["00000000000000000000.log"]
    files = {p: inodes(tmp_path / f"t-{p}") for p in range(3)}

    with caplog.at_level("INFO", logger="kcompat.log"):
        m2 = open_manager(tmp_path)
    assert not [r.message for r in caplog.records if any(w in r.message for w in RECOVERY_WORDS)]
    plain, idem, idle = (m2.get("t", p) for p in range(3))
    assert [plain.log_end_offset, idem.log_end_offset, idle.log_end_offset] == [3, 2, 0]
    assert plain.producer_state.producers == {} and plain.producer_state.map_end_offset == 3
    assert plain.epoch_end_offset(3) == (3, 3) and idem.epoch_end_offset(3) == (3, 2)
    assert plain.max_timestamp_offset() == (2, 5_002)
    assert idem.append(bytearray(retried), leader_epoch=3, now_ms=0).duplicate  # dedup kept
    assert idle.leader_epoch_cache.entries() == []  # the epoch is assigned again as it leads again
    idle.leader_epoch_cache.assign(3, 0, write=False)
    assert idle.epoch_end_offset(3) == (3, 0)
    m2.close()
    assert {p: inodes(tmp_path / f"t-{p}") for p in range(3)} == files  # an idle stop: nothing re-created
    assert (tmp_path / ".kafka_cleanshutdown").exists()

    m3 = open_manager(tmp_path)
    m3.get("t", 0).append(bytearray(batch(2)), leader_epoch=3, now_ms=0)
    m3.get("t", 1).append(bytearray(batch(1, producer_id=7, producer_epoch=0, base_sequence=2)),
                          leader_epoch=3, now_ms=0)  # fmt: skip
    m3.close()
    assert not list((tmp_path / "t-0").glob("*.snapshot"))  # still no producer state
    assert (tmp_path / "t-1" / "00000000000000000003.snapshot").exists()  # the state moved


def test_without_a_snapshot_a_clean_start_takes_the_state_as_empty_and_a_crash_replays(tmp_path):
    """Kafka's loader rule, which lets a clean stop skip the snapshot of an empty state: no snapshot
    after a clean shutdown means no producer state (nothing replayed: a producer that expired stays
    gone); after a crash the log is replayed from its start, as before."""
    config = LogConfig(producer_id_expiration_ms=1000)
    m = LogManager([tmp_path], config, cluster_id="c", node_id=1, clock=lambda: 0)
    plog = m.get_or_create("t", 0)
    plog.append(bytearray(batch(2, timestamp=0, producer_id=7, producer_epoch=0, base_sequence=0)),
                leader_epoch=0, now_ms=0)  # fmt: skip
    plog.producer_state.remove_expired(now_ms=5_000)  # expired: the state is empty again
    m.close()
    assert not list((tmp_path / "t-0").glob("*.snapshot"))
    m2 = LogManager([tmp_path], config, cluster_id="c", node_id=1, clock=lambda: 0)
    assert m2.get("t", 0).producer_state.producers == {}  # not replayed from the log
    # m2 is never closed, as after a crash: the next start replays the log
    m3 = LogManager([tmp_path], config, cluster_id="c", node_id=1, clock=lambda: 0)
    assert list(m3.get("t", 0).producer_state.producers) == [7]


def test_a_close_past_its_deadline_leaves_no_marker_and_the_next_start_recovers(tmp_path, caplog):
    """A stop cut short (the disk far behind): no checkpoint moves and no marker, as after a crash."""
    m = LogManager([tmp_path], LogConfig(), cluster_id="c", node_id=1, clock=lambda: 0)
    for p in range(4):
        m.get_or_create("t", p).append(batch(3 + p), leader_epoch=0, now_ms=0)
    checkpoint = (tmp_path / "recovery-point-offset-checkpoint").read_text()
    assert m.close(deadline=time.monotonic() - 1) is False
    assert "clean stop cut short: 0 of 4 logs closed" in caplog.text
    assert not (tmp_path / ".kafka_cleanshutdown").exists()
    assert (tmp_path / "recovery-point-offset-checkpoint").read_text() == checkpoint
    again = LogManager([tmp_path], LogConfig(), cluster_id="c", node_id=1, clock=lambda: 0)
    assert [again.get("t", p).log_end_offset for p in range(4)] == [3, 4, 5, 6]
    assert again.close(deadline=time.monotonic() + 60) is True  # in time: a clean stop, marked
    assert (tmp_path / ".kafka_cleanshutdown").exists()
    assert "orders" not in (tmp_path / "recovery-point-offset-checkpoint").read_text()
    assert "t 3 6" in (tmp_path / "recovery-point-offset-checkpoint").read_text()


def test_a_sync_that_outlasts_the_deadline_is_left_to_run_on(tmp_path, monkeypatch):
    """The filesystem sync runs in a process of its own: past the deadline it is not waited for."""
    m = LogManager([tmp_path], LogConfig(), cluster_id="c", node_id=1, clock=lambda: 0)
    m.get_or_create("t", 0).append(batch(2), leader_epoch=0, now_ms=0)
    bin_dir = tmp_path.parent / "slow-bin"
    bin_dir.mkdir()
    (bin_dir / "sync").write_text("#!/bin/sh\nsleep 30\n")
    (bin_dir / "sync").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    t0 = time.monotonic()
    assert m.close(deadline=t0 + 0.5) is False
    assert time.monotonic() - t0 < 5
    assert not (tmp_path / ".kafka_cleanshutdown").exists()
    (left,) = LEFT_SYNCING
    assert left.poll() is None  # still syncing, not waited for
    left.kill()
    left.wait()
    LEFT_SYNCING.clear()


def test_maintenance_writes_the_epochs_records_carry_so_that_a_stop_need_not(tmp_path):
    m = open_manager(tmp_path)
    used, idle = m.get_or_create("t", 0), m.get_or_create("t", 1)
    for plog in (used, idle):
        plog.leader_epoch_cache.assign(2, 0, write=False)  # as a partition becoming leader does
    used.append(bytearray(batch(2)), leader_epoch=2, now_ms=0)
    m.run_maintenance(now_ms=0)
    assert (tmp_path / "t-0" / "leader-epoch-checkpoint").read_text() == "0\n1\n2 0\n"
    assert not (tmp_path / "t-1" / "leader-epoch-checkpoint").exists()  # no record in epoch 2 yet
    inode = (tmp_path / "t-0" / "leader-epoch-checkpoint").stat().st_ino
    m.close()
    assert (tmp_path / "t-0" / "leader-epoch-checkpoint").stat().st_ino == inode  # not written again
    again = open_manager(tmp_path)
    assert again.get("t", 0).epoch_end_offset(2) == (2, 2)
