"""What an operator reads when a controller or a peer broker fails this broker (issue 26): Kafka's
error names with what happens next, and a peer's failure in words, no Python exception text."""

from __future__ import annotations

import asyncio

import pytest

from kcompat.server.cluster.controller_channel import ControllerChannel, ControllerUnavailable
from kcompat.server.cluster.peer_errors import registration_refused
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages.api_versions import API_VERSIONS

PYTHON_WORDS = ("Error", "Exception", "bytes read", "expected bytes", "errno", "Errno")


def test_a_registration_refusal_names_the_error_and_what_happens_next() -> None:
    assert registration_refused(ErrorCode.DUPLICATE_BROKER_REGISTRATION) == (
        "DUPLICATE_BROKER_REGISTRATION: the controllers still hold this broker's previous session; "
        "retrying until it expires (broker.session.timeout.ms)"
    )
    assert registration_refused(ErrorCode.INCONSISTENT_CLUSTER_ID).startswith("INCONSISTENT_CLUSTER_ID: ")
    assert registration_refused(ErrorCode.INVALID_REQUEST).startswith("INVALID_REQUEST: retrying")
    assert registration_refused(9999).startswith("error 9999: retrying")


def _fail(handle: str) -> str:
    """The ControllerUnavailable text of one call to a peer on 127.0.0.1 that `handle`s it."""

    async def go() -> str:
        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                await reader.read(1)
                if handle == "garbage":
                    writer.write(b"\x00\x00\x00\x02\x00\x00")
                    await writer.drain()
                elif handle == "silent":
                    await asyncio.sleep(1)
            finally:
                writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        if handle == "refused":
            server.close()
            await server.wait_closed()
        channel = ControllerChannel([("127.0.0.1", port)], client_id="t", request_timeout_s=0.5)
        body = {"client_software_name": "t", "client_software_version": "1"}
        try:
            with pytest.raises(ControllerUnavailable) as failed:
                await channel.call(API_VERSIONS.key, 3, body)
        finally:
            channel.close()
            server.close()
        return str(failed.value)

    return asyncio.run(go())


@pytest.mark.parametrize(
    ("handle", "said"),
    [
        ("close", "closed the connection"),
        ("refused", "refused the connection"),
        ("silent", "did not answer within 0.5 s"),
        ("garbage", "sent an answer that is not Kafka's"),
    ],
)
def test_a_peer_failure_is_said_in_words(handle: str, said: str) -> None:
    text = _fail(handle)
    assert text.startswith("127.0.0.1:") and said in text, text
    assert not [w for w in PYTHON_WORDS if w in text], text
