"""The one user-facing error type. The library raises these; the edges (CLI, server) render them."""

from __future__ import annotations


class RetainedError(Exception):
    """An expected failure with a message for a person and, where there is one, a hint."""

    exit_code = 1

    def __init__(self, message: str, hint: str | None = None, tool_hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint  # for a person at the command line
        self.tool_hint = tool_hint  # for a model calling tools over MCP, where it differs (no CLI flags)

    def __str__(self) -> str:
        return f"{self.message} (hint: {self.hint})" if self.hint else self.message


class UsageError(RetainedError):
    """The caller asked for something invalid; nothing was changed."""

    exit_code = 2


class Refused(RetainedError):
    """A valid request that the records as they stand do not allow (a record already corrected, one
    that is not retracted, one already purged); nothing was changed. Not a usage error: the same
    command line succeeds on another state (the README's exit code 1)."""


class StoreError(RetainedError):
    """The store cannot be used as it is (unsafe path, unreadable file, ...); nothing was changed."""


class NotFound(RetainedError):
    """A named record does not exist."""
