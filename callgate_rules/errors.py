"""The exceptions callgate raises and its hosts raise, and where in a file a problem is.

Read it top to bottom like ``httpx/_exceptions.py``: the exceptions a host's executor
raises (grouped by *when* they happen: before sending or after), then those callgate
itself raises for bad configuration or storage. The vocabulary of outcomes (error classes
and routes) is in ``taxonomy``.
"""

from __future__ import annotations

from dataclasses import dataclass

from callgate_rules.taxonomy import ErrorClass


class CallgateError(Exception):
    """Base class of every exception callgate raises on purpose.

    ``exit_code`` is the status the ``callgate`` command exits with when one reaches it
    (as click's exceptions carry theirs); a subclass that means something else to a shell
    script sets its own.
    """

    exit_code: int = 2  # bad input: the documents, a file or an option


# Configuration: the YAML documents could not be loaded or compiled ------------------------


@dataclass(frozen=True)
class Location:
    """A place in a source file, 1-based, as people and editors count."""

    path: str
    line: int = 0
    column: int = 0

    def __str__(self) -> str:
        if self.line:
            return f"{self.path}:{self.line}:{self.column}"
        return self.path


class ConfigError(CallgateError):
    """The documents have errors; ``findings`` lists each with its file, line and field."""

    def __init__(self, findings: list[object]) -> None:
        self.findings = findings
        super().__init__("\n".join(str(f) for f in findings))


class InputError(CallgateError):
    """A file a person handed to the CLI (a call, an actor, a world) cannot be read."""


# Exceptions a host's executor raises ---------------------------------------------------------
#
# The line that matters most: did the request leave us? Before sending, a retry is safe.
# After sending, the outcome is unknown and only reconciliation may decide.


class ToolError(CallgateError):
    """Base class for failures an executor reports to the gate."""

    error_class: ErrorClass = ErrorClass.PERMANENT


class BeforeSending(ToolError):
    """The request never reached the destination; nothing can have happened there."""

    error_class = ErrorClass.TRANSIENT


class Unavailable(BeforeSending):
    """The destination could not be reached (connect refused, DNS, circuit open)."""


class RateLimited(BeforeSending):
    """The destination asked us to slow down before accepting the request."""

    def __init__(self, message: str = "rate limited", retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class AfterSending(ToolError):
    """The request was sent and the answer was lost: it may or may not have been applied."""

    error_class = ErrorClass.UNKNOWN_OUTCOME


class OutcomeTimeout(AfterSending):
    """No answer arrived within the deadline after the request was sent."""


class ConnectionLost(AfterSending):
    """The connection broke after the request was sent."""


class Refused(ToolError):
    """The destination answered and refused for good (validation, policy, quota)."""

    error_class = ErrorClass.PERMANENT


class StateConflict(ToolError):
    """The destination answered that the record's state forbids the action."""

    error_class = ErrorClass.CONFLICT


# Storage ------------------------------------------------------------------------------------


class StoreError(CallgateError):
    """The receipt store failed or is misconfigured."""


class StoreConfigError(StoreError):
    """The receipt store cannot be opened (bad URL, server down, missing privileges)."""


class OperationIdReused(StoreError):
    """An operation ID already names a call with different arguments."""


class LeaseLost(StoreError):
    """This worker no longer holds the claim it tries to complete (its lease expired)."""


class ConfirmationError(CallgateError):
    """A confirmation token is invalid, expired, tampered with or already used."""
