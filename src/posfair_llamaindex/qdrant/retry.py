"""Retrying Qdrant calls: which failures are worth another attempt, how long to wait, and the final error.

A server that answers "no" (a bad API key, a malformed request) is told once; one that does not answer,
or answers "not now" (HTTP 429, 502, 503, 504), is asked again with exponential backoff.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Optional, TypeVar

from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from posfair_llamaindex.errors import QdrantUnavailableError

logger = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True)
class RetryConfig:
    """How often and how patiently a Qdrant call is retried.

    ``retries`` is the number of extra attempts after the first; the wait after attempt ``i`` is
    ``backoff_s * 2**i`` capped at ``max_backoff_s`` (a server's ``Retry-After`` is honoured up to the cap).
    """

    retries: int = 3
    backoff_s: float = 0.5
    max_backoff_s: float = 30.0
    retry_statuses: frozenset = frozenset({429, 502, 503, 504})

    def __post_init__(self) -> None:
        if isinstance(self.retries, bool) or not isinstance(self.retries, int) or self.retries < 0:
            raise ValueError(f"retries must be an int >= 0, got {self.retries!r}")
        if self.backoff_s < 0 or self.max_backoff_s < 0:
            raise ValueError(f"backoff times must be >= 0, got {self.backoff_s} and {self.max_backoff_s}")

    def delay_after(self, error: Exception, attempt: int, *, what: str, target: str) -> float:
        """Seconds to wait after failed attempt ``attempt`` (0-based); raises when the failure is final."""
        if isinstance(error, UnexpectedResponse) and error.status_code not in self.retry_statuses:
            raise _refused(error, what, target) from None
        if attempt >= self.retries:
            raise QdrantUnavailableError(
                f"Qdrant at {target} did not answer ({what}) after {self.retries + 1} attempts: {_describe(error)}"
            ) from None
        delay = min(self.max_backoff_s, self.backoff_s * 2**attempt)
        hinted = _retry_after(error)
        if hinted is not None:
            delay = min(self.max_backoff_s, max(delay, hinted))
        logger.warning("Qdrant at %s: %s failed (%s); retrying in %.1fs", target, what, _describe(error), delay)
        return delay


DEFAULT_RETRY = RetryConfig()


def _transient_errors() -> tuple:
    """Errors that mean "no answer": qdrant-client wraps HTTP transport errors; gRPC raises RpcError."""
    errors = [ResponseHandlingException, ConnectionError, TimeoutError]
    try:
        import grpc

        errors.append(grpc.RpcError)
    except ImportError:  # gRPC is an optional part of qdrant-client
        pass
    return tuple(errors)


RETRIED_ERRORS = (UnexpectedResponse, *_transient_errors())


def with_retries(call: Callable[[], T], *, what: str, target: str, policy: RetryConfig = DEFAULT_RETRY) -> T:
    """Run ``call``, retrying as ``policy`` says; raises a clear error when it gives up."""
    attempt = 0
    while True:
        try:
            return call()
        except RETRIED_ERRORS as error:
            time.sleep(policy.delay_after(error, attempt, what=what, target=target))
            attempt += 1


async def awith_retries(
    call: Callable[[], Awaitable[T]], *, what: str, target: str, policy: RetryConfig = DEFAULT_RETRY
) -> T:
    """The async twin of :func:`with_retries`: ``call`` returns an awaitable."""
    attempt = 0
    while True:
        try:
            return await call()
        except RETRIED_ERRORS as error:
            await asyncio.sleep(policy.delay_after(error, attempt, what=what, target=target))
            attempt += 1


def describe_client(client: Any) -> str:
    """Where a client points, for error messages: its URL or local path."""
    inner = getattr(client, "_client", None)
    location = getattr(inner, "location", None) or getattr(inner, "rest_uri", None)
    return str(location) if location else type(client).__name__


def is_local(client: Any) -> bool:
    """True for embedded Qdrant (``QdrantClient(path=...)`` or ``":memory:"``)."""
    return type(getattr(client, "_client", None)).__name__ in ("QdrantLocal", "AsyncQdrantLocal")


def is_edge(client: Any) -> bool:
    """True for a client on Qdrant Edge (``EdgeQdrantClient``): embedded, with a server's engine but no cluster."""
    return type(getattr(client, "_client", None)).__name__ in ("EdgeBackend", "AsyncEdgeBackend")


def _refused(error: UnexpectedResponse, what: str, target: str) -> Exception:
    hint = " (check the API key)" if error.status_code in (401, 403) else ""
    detail = error.content.decode("utf-8", "replace")[:300] if error.content else ""
    message = f"Qdrant at {target} refused {what}: HTTP {error.status_code} {error.reason_phrase}{hint} {detail}"
    return RuntimeError(message.strip())


def _retry_after(error: Exception) -> Optional[float]:
    headers = getattr(error, "headers", None)
    value = headers.get("retry-after") if headers is not None else None
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:  # an HTTP date: fall back to the policy's own backoff
        return None


def _describe(error: BaseException) -> str:
    if isinstance(error, UnexpectedResponse):
        return f"HTTP {error.status_code} {error.reason_phrase}"
    source = getattr(error, "source", None)
    return f"{type(source or error).__name__}: {source or error}"
