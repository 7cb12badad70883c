"""The one leader-epoch fencing rule that Fetch, ListOffsets and OffsetForLeaderEpoch share."""

import pytest

from kcompat.server.epoch_fencing import leader_epoch_error
from kcompat.wire.error_codes import ErrorCode


@pytest.mark.parametrize(
    ("requested", "current", "error"),
    [
        (-1, 0, None),  # the client did not name an epoch: nothing to check
        (-1, 5, None),
        (0, 0, None),
        (5, 5, None),
        (4, 5, ErrorCode.FENCED_LEADER_EPOCH),  # the client is behind: refresh metadata
        (6, 5, ErrorCode.UNKNOWN_LEADER_EPOCH),  # the client is ahead of this broker
    ],
)
def test_leader_epoch_error(requested: int, current: int, error: ErrorCode | None) -> None:
    assert leader_epoch_error(requested, current) == error
