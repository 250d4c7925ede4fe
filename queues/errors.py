"""Domain errors. One mapping to HTTP codes, shared by the API and MCP surfaces."""

from __future__ import annotations


class DomainError(Exception):
    code = "error"
    status = 400

    def __init__(self, message: str, **extra) -> None:
        super().__init__(message)
        self.message = message
        self.extra = extra

    def as_dict(self) -> dict:
        return {"error": {"code": self.code, "message": self.message, **self.extra}}


class Invalid(DomainError):
    code, status = "invalid", 400


class Unauthorized(DomainError):
    code, status = "unauthorized", 401


class Forbidden(DomainError):
    code, status = "forbidden", 403


class NotFound(DomainError):
    code, status = "not_found", 404

    def __init__(self, message: str = "No such todo.", **extra) -> None:
        super().__init__(message, **extra)


class Conflict(DomainError):
    code, status = "conflict", 409


class RateLimited(DomainError):
    code, status = "rate_limited", 429


class Unavailable(DomainError):
    code, status = "unavailable", 503
