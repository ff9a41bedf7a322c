"""Retry rules for Qdrant calls, sync and async, without a server (the backends are in integration_tests/)."""

from __future__ import annotations

import httpx
import pytest
from qdrant_client.http.exceptions import UnexpectedResponse

from posfair_llamaindex.qdrant import QdrantUnavailableError, awith_retries, with_retries


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


def forbidden() -> UnexpectedResponse:
    return UnexpectedResponse(403, "Forbidden", b"bad api key", httpx.Headers())


def test_transient_failures_are_retried_with_a_warning(caplog):
    flaky = Flaky(ConnectionError("refused"), failures=2)
    assert with_retries(flaky, what="get_collections", target="http://q", retries=2, backoff_s=0) == "ok"
    assert flaky.calls == 3
    assert sum("retrying" in r.getMessage() for r in caplog.records) == 2


async def test_async_retries_follow_the_same_rules(caplog):
    flaky = Flaky(ConnectionError("refused"), failures=2)
    assert await awith_retries(flaky.acall, what="get_collections", target="http://q", retries=2, backoff_s=0) == "ok"
    assert flaky.calls == 3 and sum("retrying" in r.getMessage() for r in caplog.records) == 2
    exhausted = Flaky(TimeoutError("slow"), failures=5)
    with pytest.raises(QdrantUnavailableError, match=r"did not answer \(upsert\) after 2 attempts: TimeoutError"):
        await awith_retries(exhausted.acall, what="upsert", target="http://q", retries=1, backoff_s=0)
    assert exhausted.calls == 2


@pytest.mark.parametrize("run_async", [False, True])
async def test_an_answer_from_the_server_is_not_retried(run_async):
    refused = Flaky(forbidden(), failures=5)
    with pytest.raises(RuntimeError, match="refused create_collection: HTTP 403 Forbidden .check the API key. bad api key"):
        if run_async:
            await awith_retries(refused.acall, what="create_collection", target="http://q", retries=3, backoff_s=0)
        else:
            with_retries(refused, what="create_collection", target="http://q", retries=3, backoff_s=0)
    assert refused.calls == 1
