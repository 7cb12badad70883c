"""Who the client is and what it may do: SASL per connection, OAUTHBEARER validation, and the
per-request access checks handlers ask the authorizer (kcompat.security) through."""
