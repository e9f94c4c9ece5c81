"""What the client raises on its own account. The wrappers raise subclasses that are also the
SDK's own exception types (a refused call is an `openai.APIConnectionError`, and so on), so code
written for the plain SDK keeps catching them."""

from __future__ import annotations


class ClientError(Exception):
    """Base of the errors the sluicegate client raises itself."""


class ConcurrencyLimitExceeded(ClientError):
    """The process already has `max_in_flight` calls running and `max_waiting` waiting: the call
    is refused at once rather than queued without bound. Nothing was sent."""

    max_in_flight: int = 0
    max_waiting: int = 0


def concurrency_message(max_in_flight: int, max_waiting: int) -> str:
    return (
        f"sluicegate client: {max_in_flight} calls in flight and {max_waiting} waiting in this "
        "process; the call was refused without being sent (raise Governor.max_in_flight or "
        "max_waiting, or slow down)"
    )
