"""The one exception that decoding untrusted bytes may raise.

Anything else escaping a decoder is a bug in kcompat, not in the peer's bytes.
"""


class DecodeError(ValueError):
    """The peer sent bytes that are not a valid encoding; `field` is the dotted path to the culprit."""

    def __init__(self, reason: str, field: str | None = None) -> None:
        self.reason = reason
        self.field = field
        super().__init__(f"{field}: {reason}" if field else reason)

    def within(self, outer: str) -> "DecodeError":
        """The same error with the enclosing field's name put in front of the path."""
        return DecodeError(self.reason, f"{outer}.{self.field}" if self.field else outer)
