"""Secrets: endpoint tokens and lease tokens. 128+ random bits, shown once, stored as SHA-256,
compared in constant time, never logged (no function here logs, and reprs hide them)."""

from __future__ import annotations

import hashlib
import hmac
import secrets

ENDPOINT_TOKEN_PREFIX = "sbe_"
LEASE_TOKEN_PREFIX = "sbl_"


def new_endpoint_token() -> str:
    return ENDPOINT_TOKEN_PREFIX + secrets.token_urlsafe(32)  # 256 bits


def new_lease_token() -> str:
    return LEASE_TOKEN_PREFIX + secrets.token_urlsafe(16)  # 128 bits


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


# Longer than any token we vend, by far: a header of megabytes is not hashed.
MAX_TOKEN_CHARS = 200


def lookup_digest(token: str | None) -> str | None:
    """The digest to look ``token`` up by, or None when it cannot be a token (none, not a
    string, over MAX_TOKEN_CHARS)."""
    if not token or not isinstance(token, str) or len(token) > MAX_TOKEN_CHARS:
        return None
    return digest(token)


def matches(token: str | None, stored_digest: str | None) -> bool:
    """Does ``token`` hash to ``stored_digest``? Constant time in the digest comparison."""
    if not token or not stored_digest:
        return False
    return hmac.compare_digest(digest(token), stored_digest)
