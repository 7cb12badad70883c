"""CreateDelegationToken (key 38) v1-3, RenewDelegationToken (key 39) v1-2, ExpireDelegationToken
(key 40) v1-2, DescribeDelegationToken (key 41) v1-3 (v0 of each was removed in Kafka 4.0).

As Kafka's KafkaApis and DelegationTokenControlManager answer them (the decisions are
kcompat.security.delegation_tokens', the file and the clock kcompat.server.auth.delegation_tokens'):
- a connection authenticated with a token, a PLAINTEXT one and an anonymous SSL one may not use
  them: DELEGATION_TOKEN_REQUEST_NOT_ALLOWED;
- a token for another owner needs CREATE_TOKENS on that User (DELEGATION_TOKEN_AUTHORIZATION_FAILED);
  renewers must be User principals (INVALID_PRINCIPAL_TYPE);
- without delegation.token.secret.key: DELEGATION_TOKEN_AUTH_DISABLED;
- renew and expire by HMAC: DELEGATION_TOKEN_NOT_FOUND, DELEGATION_TOKEN_EXPIRED,
  DELEGATION_TOKEN_OWNER_MISMATCH (neither the owner nor a renewer); a negative expiry period
  removes the token at once;
- Describe lists the tokens the requester owns or renews, and others it may DESCRIBE (resource
  DelegationToken) or whose owner it may DESCRIBE_TOKENS (resource User); an empty owner list
  lists none, a null one all.
"""

from __future__ import annotations

from kcompat.security.authorizer import AclOperation, ResourceType
from kcompat.security.delegation_tokens import ERROR_TIMESTAMP, TokenInformation, visible
from kcompat.server.auth import access
from kcompat.server.auth.delegation_tokens import ANONYMOUS, allow_token_requests
from kcompat.server.context import RequestContext
from kcompat.server.registry import handles
from kcompat.wire.error_codes import ErrorCode
from kcompat.wire.messages.create_delegation_token import CREATE_DELEGATION_TOKEN
from kcompat.wire.messages.describe_delegation_token import DESCRIBE_DELEGATION_TOKEN
from kcompat.wire.messages.expire_delegation_token import EXPIRE_DELEGATION_TOKEN
from kcompat.wire.messages.renew_delegation_token import RENEW_DELEGATION_TOKEN
from kcompat.wire.protocol import Request
from kcompat.wire.types.create_delegation_token import (
    CreateDelegationTokenRequest,
    CreateDelegationTokenResponse,
)
from kcompat.wire.types.describe_delegation_token import (
    DescribedDelegationToken,
    DescribedDelegationTokenRenewer,
    DescribeDelegationTokenRequest,
    DescribeDelegationTokenResponse,
)
from kcompat.wire.types.expire_delegation_token import (
    ExpireDelegationTokenRequest,
    ExpireDelegationTokenResponse,
)
from kcompat.wire.types.renew_delegation_token import (
    RenewDelegationTokenRequest,
    RenewDelegationTokenResponse,
)


def _split(principal: str) -> tuple[str, str]:
    kind, _, name = principal.partition(":")
    return kind, name


def _principal(ctx: RequestContext) -> str:
    return ctx.client.principal if ctx.client is not None else ANONYMOUS


@handles(CREATE_DELEGATION_TOKEN, "1-3")
async def create_delegation_token(
    ctx: RequestContext, request: Request[CreateDelegationTokenRequest]
) -> CreateDelegationTokenResponse:
    body = request.body
    requester = _principal(ctx)
    owner = requester
    if body.owner_principal_name:
        owner = f"{body.owner_principal_type}:{body.owner_principal_name}"
    renewers = [f"{r.principal_type}:{r.principal_name}" for r in body.renewers]
    error = ErrorCode.NONE
    if not allow_token_requests(ctx.client):
        error = ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
    elif owner != requester and not access.allowed(ctx, AclOperation.CREATE_TOKENS, ResourceType.USER, owner):
        error = ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED
    token: TokenInformation | None = None
    if error is ErrorCode.NONE:
        error, token = ctx.tokens.create(owner, requester, renewers, body.max_lifetime_ms)
    owner_type, owner_name = _split(owner)
    requester_type, requester_name = _split(requester)
    if token is None:
        return CreateDelegationTokenResponse(
            error_code=int(error),
            principal_type=owner_type,
            principal_name=owner_name,
            token_requester_principal_type=requester_type,
            token_requester_principal_name=requester_name,
            issue_timestamp_ms=ERROR_TIMESTAMP,
            expiry_timestamp_ms=ERROR_TIMESTAMP,
            max_timestamp_ms=ERROR_TIMESTAMP,
        )
    return CreateDelegationTokenResponse(
        error_code=0,
        principal_type=owner_type,
        principal_name=owner_name,
        token_requester_principal_type=requester_type,
        token_requester_principal_name=requester_name,
        issue_timestamp_ms=token.issue_ms,
        expiry_timestamp_ms=token.expiry_ms,
        max_timestamp_ms=token.max_ms,
        token_id=token.token_id,
        hmac=ctx.tokens.hmac(token.token_id),
    )


@handles(RENEW_DELEGATION_TOKEN, "1-2")
async def renew_delegation_token(
    ctx: RequestContext, request: Request[RenewDelegationTokenRequest]
) -> RenewDelegationTokenResponse:
    if not allow_token_requests(ctx.client):
        return RenewDelegationTokenResponse(
            error_code=int(ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED),
            expiry_timestamp_ms=ERROR_TIMESTAMP,
        )
    body = request.body
    error, expiry = ctx.tokens.renew(_principal(ctx), body.hmac, body.renew_period_ms)
    return RenewDelegationTokenResponse(error_code=int(error), expiry_timestamp_ms=expiry)


@handles(EXPIRE_DELEGATION_TOKEN, "1-2")
async def expire_delegation_token(
    ctx: RequestContext, request: Request[ExpireDelegationTokenRequest]
) -> ExpireDelegationTokenResponse:
    if not allow_token_requests(ctx.client):
        return ExpireDelegationTokenResponse(
            error_code=int(ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED),
            expiry_timestamp_ms=ERROR_TIMESTAMP,
        )
    body = request.body
    error, expiry = ctx.tokens.expire(_principal(ctx), body.hmac, body.expiry_time_period_ms)
    return ExpireDelegationTokenResponse(error_code=int(error), expiry_timestamp_ms=expiry)


@handles(DESCRIBE_DELEGATION_TOKEN, "1-3")
async def describe_delegation_token(
    ctx: RequestContext, request: Request[DescribeDelegationTokenRequest]
) -> DescribeDelegationTokenResponse:
    if not allow_token_requests(ctx.client):
        return DescribeDelegationTokenResponse(error_code=int(ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED))
    tokens = ctx.tokens
    if not tokens.enabled:
        return DescribeDelegationTokenResponse(error_code=int(ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED))
    asked = request.body.owners
    if asked is not None and not asked:
        return DescribeDelegationTokenResponse(error_code=0, tokens=[])
    owners = None if asked is None else [f"{o.principal_type}:{o.principal_name}" for o in asked]
    requester = _principal(ctx)

    def may_describe_token(token_id: str) -> bool:
        return access.allowed(ctx, AclOperation.DESCRIBE, ResourceType.DELEGATION_TOKEN, token_id, quiet=True)

    def may_describe_owner(owner: str) -> bool:
        return access.allowed(ctx, AclOperation.DESCRIBE_TOKENS, ResourceType.USER, owner, quiet=True)

    found = [
        t for t in tokens.tokens() if visible(requester, owners, t, may_describe_token, may_describe_owner)
    ]
    return DescribeDelegationTokenResponse(error_code=0, tokens=[_described(ctx, t) for t in found])


def _described(ctx: RequestContext, token: TokenInformation) -> DescribedDelegationToken:
    owner_type, owner_name = _split(token.owner)
    requester_type, requester_name = _split(token.requester)
    return DescribedDelegationToken(
        principal_type=owner_type,
        principal_name=owner_name,
        token_requester_principal_type=requester_type,
        token_requester_principal_name=requester_name,
        issue_timestamp=token.issue_ms,
        expiry_timestamp=token.expiry_ms,
        max_timestamp=token.max_ms,
        token_id=token.token_id,
        hmac=ctx.tokens.hmac(token.token_id),
        renewers=[
            DescribedDelegationTokenRenewer(principal_type=k, principal_name=n)
            for k, n in map(_split, token.renewers)
        ],
    )
