"""SaslHandshake (key 17) v0-1, SaslAuthenticate (key 36) v0-2, DescribeUserScramCredentials
(key 50) v0, AlterUserScramCredentials (key 51) v0.

The SASL exchange itself is the connection's (kcompat.server.auth.sasl): a SaslHandshake or
SaslAuthenticate reaches a handler only on a listener without SASL, or a SaslAuthenticate after
the exchange, and Kafka answers both with ILLEGAL_SASL_STATE.

SCRAM credentials (KIP-554): Describe lists mechanism and iterations only; Alter derives and stores
StoredKey/ServerKey from the SaltedPassword the client computed, never a password. In cluster mode
Describe reads the metadata image's credentials and Alter is forwarded to the controller, which
validates and writes UserScramCredentialRecords (the handler here is a single node's). Errors as
Kafka's ScramControlManager gives them: an empty name or iterations outside [4096, 16384] ->
UNACCEPTABLE_CREDENTIAL, an unknown mechanism -> UNSUPPORTED_SASL_MECHANISM, a user named twice
for one mechanism -> DUPLICATE_RESOURCE, deleting what does not exist -> RESOURCE_NOT_FOUND.
"""

from __future__ import annotations

from collections import Counter

from kcompat.server.auth import access
from kcompat.server.context import RequestContext
from kcompat.server.registry import handles
from kcompat.storage.scram_credentials import (
    MAX_ITERATIONS,
    MECHANISM_IDS,
    MECHANISMS,
    MIN_ITERATIONS,
    ScramCredentialStore,
    derive,
)
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages.alter_user_scram_credentials import ALTER_USER_SCRAM_CREDENTIALS
from kcompat.wire.messages.describe_user_scram_credentials import DESCRIBE_USER_SCRAM_CREDENTIALS
from kcompat.wire.messages.sasl_authenticate import SASL_AUTHENTICATE
from kcompat.wire.messages.sasl_handshake import SASL_HANDSHAKE
from kcompat.wire.protocol import Request
from kcompat.wire.types.alter_user_scram_credentials import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    AlterUserScramCredentialsResult,
)
from kcompat.wire.types.describe_user_scram_credentials import (
    CredentialInfo,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
    DescribeUserScramCredentialsResult,
)
from kcompat.wire.types.sasl_authenticate import SaslAuthenticateRequest, SaslAuthenticateResponse
from kcompat.wire.types.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse


@handles(SASL_HANDSHAKE, "0-1")
async def sasl_handshake(
    ctx: RequestContext, request: Request[SaslHandshakeRequest]
) -> SaslHandshakeResponse:
    return SaslHandshakeResponse(error_code=int(ErrorCode.ILLEGAL_SASL_STATE), mechanisms=[])


@handles(SASL_AUTHENTICATE, "0-2")
async def sasl_authenticate(
    ctx: RequestContext, request: Request[SaslAuthenticateRequest]
) -> SaslAuthenticateResponse:
    return SaslAuthenticateResponse(
        error_code=int(ErrorCode.ILLEGAL_SASL_STATE),
        error_message="SaslAuthenticate request received after successful authentication",
    )


@handles(DESCRIBE_USER_SCRAM_CREDENTIALS, "0")
async def describe_user_scram_credentials(
    ctx: RequestContext, request: Request[DescribeUserScramCredentialsRequest]
) -> DescribeUserScramCredentialsResponse:
    store = ctx.scram
    if (denied := access.cluster_error(ctx, access.DESCRIBE)) is not None:
        return DescribeUserScramCredentialsResponse(error_code=int(denied), error_message=None, results=[])
    asked = request.body.users
    names = [u.name for u in asked] if asked else store.users()
    counts = Counter(names)
    results = []
    for name in dict.fromkeys(names):
        if counts[name] > 1:
            results.append(
                DescribeUserScramCredentialsResult(
                    user=name,
                    error_code=int(ErrorCode.DUPLICATE_RESOURCE),
                    error_message=f"Cannot describe SCRAM credentials for the same user twice in a single request: {name}",
                )
            )
            continue
        mechs = store.mechanisms_of(name)
        if not mechs:
            results.append(
                DescribeUserScramCredentialsResult(
                    user=name,
                    error_code=int(ErrorCode.RESOURCE_NOT_FOUND),
                    error_message=f"Attempt to describe a user credential that does not exist: {name}",
                )
            )
            continue
        infos = [
            CredentialInfo(mechanism=MECHANISM_IDS[m], iterations=c.iterations)
            for m, c in sorted(mechs.items())
        ]
        results.append(
            DescribeUserScramCredentialsResult(
                user=name, error_code=0, error_message=None, credential_infos=infos
            )
        )
    return DescribeUserScramCredentialsResponse(error_code=0, error_message=None, results=results)


@handles(ALTER_USER_SCRAM_CREDENTIALS, "0")
async def alter_user_scram_credentials(
    ctx: RequestContext, request: Request[AlterUserScramCredentialsRequest]
) -> AlterUserScramCredentialsResponse:
    body = request.body
    store = ctx.scram
    denied = access.cluster_error(ctx, access.ALTER)
    if denied is None and not isinstance(store, ScramCredentialStore):
        denied = ErrorCode.NOT_CONTROLLER  # cluster mode forwards Alter before any handler runs
    if denied is not None:
        users = dict.fromkeys([d.name for d in body.deletions] + [u.name for u in body.upsertions])
        return AlterUserScramCredentialsResponse(
            results=[
                AlterUserScramCredentialsResult(user=u, error_code=int(denied), error_message=None)
                for u in users
            ]
        )
    assert isinstance(store, ScramCredentialStore)
    errors = _alter_errors(body, store)
    for d in body.deletions:
        if d.name not in errors:
            store.delete(d.name, MECHANISMS[d.mechanism])
    for u in body.upsertions:
        if u.name not in errors:
            name = MECHANISMS[u.mechanism]
            store.upsert(u.name, name, derive(name, u.salted_password, u.salt, u.iterations))
    store.save()
    users = dict.fromkeys([d.name for d in body.deletions] + [u.name for u in body.upsertions])
    return AlterUserScramCredentialsResponse(
        results=[
            AlterUserScramCredentialsResult(
                user=user,
                error_code=int(errors[user][0]) if user in errors else 0,
                error_message=errors[user][1] if user in errors else None,
            )
            for user in users
        ]
    )


def _alter_errors(
    body: AlterUserScramCredentialsRequest, store: ScramCredentialStore
) -> dict[str, tuple[ErrorCode, str]]:
    """The first error of each user the request names (a user with one changes nothing)."""
    pairs = Counter((d.name, d.mechanism) for d in body.deletions) + Counter(
        (u.name, u.mechanism) for u in body.upsertions
    )
    errors: dict[str, tuple[ErrorCode, str]] = {}

    def fail(user: str, error: ErrorCode, message: str) -> None:
        errors.setdefault(user, (error, message))

    for (user, mechanism), n in pairs.items():
        if n > 1:
            fail(
                user,
                ErrorCode.DUPLICATE_RESOURCE,
                "A user credential cannot be altered twice in the same request",
            )
        if not user:
            fail(user, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
        if mechanism not in MECHANISMS:
            fail(user, ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
    for d in body.deletions:
        if d.name not in errors and store.get(d.name, MECHANISMS[d.mechanism]) is None:
            fail(
                d.name,
                ErrorCode.RESOURCE_NOT_FOUND,
                "Attempt to delete a user credential that does not exist",
            )
    for u in body.upsertions:
        if u.iterations < MIN_ITERATIONS:
            fail(u.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
        elif u.iterations > MAX_ITERATIONS:
            fail(u.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
        elif not u.salt or not u.salted_password:
            fail(u.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt and salted password must not be empty")
    return errors
