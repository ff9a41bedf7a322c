"""Retry rules for Qdrant calls, sync and async, without a server (the backends are in integration_tests/)."""

from __future__ import annotations

import dataclasses

import httpx
import pytest
from qdrant_client.http.exceptions import UnexpectedResponse

from posfair_llamaindex.qdrant import QdrantUnavailableError, RetryConfig, awith_retries, with_retries

FAST = RetryConfig(retries=2, backoff_s=0)


class Flaky:
    """Fails with ``error`` ``failures`` times, then answers "ok"; counts the calls."""

    def __init__(self, error: Exception, failures: int) -> None:
        self.error, self.failures, self.calls = error, failures, 0

    def __call__(self) -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        return "ok"

    async def acall(self) -> str:
        return self()


def response(status: int, reason: str, body: bytes = b"", headers=None) -> UnexpectedResponse:
    return UnexpectedResponse(status, reason, body, httpx.Headers(headers or {}))


def test_transient_failures_are_retried_with_a_warning(caplog):
    flaky = Flaky(ConnectionError("refused"), failures=2)
    assert with_retries(flaky, what="get_collections", target="http://q", policy=FAST) == "ok"
    assert flaky.calls == 3
    assert sum("retrying" in r.getMessage() for r in caplog.records) == 2


async def test_async_retries_follow_the_same_rules(caplog):
    flaky = Flaky(ConnectionError("refused"), failures=2)
    assert await awith_retries(flaky.acall, what="get_collections", target="http://q", policy=FAST) == "ok"
    assert flaky.calls == 3 and sum("retrying" in r.getMessage() for r in caplog.records) == 2
    exhausted = Flaky(TimeoutError("slow"), failures=5)
    with pytest.raises(QdrantUnavailableError, match=r"did not answer \(upsert\) after 2 attempts: TimeoutError"):
        await awith_retries(
            exhausted.acall, what="upsert", target="http://q", policy=RetryConfig(retries=1, backoff_s=0)
        )
    assert exhausted.calls == 2


@pytest.mark.parametrize(
    "status,reason", [(429, "Too Many Requests"), (503, "Service Unavailable"), (502, "Bad Gateway")]
)
@pytest.mark.parametrize("run_async", [False, True])
async def test_busy_server_answers_are_retried(status, reason, run_async):
    busy = Flaky(response(status, reason), failures=2)
    if run_async:
        assert await awith_retries(busy.acall, what="upsert", target="http://q", policy=FAST) == "ok"
    else:
        assert with_retries(busy, what="upsert", target="http://q", policy=FAST) == "ok"
    assert busy.calls == 3
    always_busy = Flaky(response(status, reason), failures=10)
    with pytest.raises(QdrantUnavailableError, match=f"after 3 attempts: HTTP {status} {reason}"):
        with_retries(always_busy, what="upsert", target="http://q", policy=FAST)
    assert always_busy.calls == 3


@pytest.mark.parametrize("run_async", [False, True])
async def test_a_refusal_from_the_server_is_not_retried(run_async):
    refused = Flaky(response(403, "Forbidden", b"bad api key"), failures=5)
    with pytest.raises(
        RuntimeError, match="refused create_collection: HTTP 403 Forbidden .check the API key. bad api key"
    ):
        if run_async:
            await awith_retries(refused.acall, what="create_collection", target="http://q", policy=FAST)
        else:
            with_retries(refused, what="create_collection", target="http://q", policy=FAST)
    assert refused.calls == 1


def test_backoff_doubles_is_capped_and_honours_retry_after():
    policy = RetryConfig(retries=5, backoff_s=0.5, max_backoff_s=3.0)
    waits = [policy.delay_after(ConnectionError("x"), attempt, what="w", target="t") for attempt in range(5)]
    assert waits == [0.5, 1.0, 2.0, 3.0, 3.0]
    hinted = response(429, "Too Many Requests", headers={"Retry-After": "2.5"})
    assert policy.delay_after(hinted, 0, what="w", target="t") == 2.5
    assert RetryConfig(max_backoff_s=1.0).delay_after(hinted, 0, what="w", target="t") == 1.0


def test_policy_is_frozen_and_validated():
    with pytest.raises(dataclasses.FrozenInstanceError):
        FAST.retries = 5  # type: ignore[misc]
    with pytest.raises(ValueError, match="retries must be an int >= 0"):
        RetryConfig(retries=-1)
    with pytest.raises(ValueError, match="backoff"):
        RetryConfig(backoff_s=-1)
