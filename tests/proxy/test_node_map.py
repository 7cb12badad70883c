"""The proxy's node map: a listener is asked for once per new node id, moves are followed, ids
above proxy.node.id.max are left out with one line."""

from __future__ import annotations

import logging

import pytest

from kcompat.proxy.node_map import NodeMap


def test_new_ids_open_once_and_moves_are_followed(caplog: pytest.LogCaptureFixture) -> None:
    opened: list[int] = []
    nodes = NodeMap("proxy.example", 9200, 10, opened.append)
    nodes.learn(1, "b1", 9092)
    nodes.learn(1, "b1", 9092)
    nodes.learn(2, "b2", 9092)
    nodes.learn(1, "b1-new", 9093)  # a restart on another address: same endpoint, new target
    assert opened == [1, 2]
    assert nodes.address(1) == ("b1-new", 9093)
    assert nodes.endpoint(1) == ("proxy.example", 9201)
    assert nodes.node_ids() == [1, 2]
    assert nodes.address(3) is None


def test_ids_above_the_maximum_are_left_out_with_one_line(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="kcompat.proxy")
    opened: list[int] = []
    nodes = NodeMap("h", 9200, 10, opened.append)
    nodes.learn(11, "b", 1)
    nodes.learn(11, "b", 1)
    assert opened == [] and nodes.address(11) is None
    assert len([r for r in caplog.records if "proxy.node.id.max" in r.getMessage()]) == 1
