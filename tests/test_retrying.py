"""The shared retry helper: Retry-After forms, caps, jitter bounds, attempt and time limits, and the
one-line excerpts of failed answers. The callers' behaviour over real HTTP is tested with them
(tests/llm/test_llm_retry.py, tests/tools/test_tools_net.py)."""

from __future__ import annotations

import asyncio
import email.utils
import functools
import math
import time

import httpx
import pytest

from kgot.retrying import (
    RetriesExhausted,
    RetryPolicy,
    answer_excerpt,
    body_excerpt,
    cause_of_type,
    error_message,
    one_line,
    parse_retry_after,
    retry_after_from_headers,
    retry_async,
)

pytestmark = pytest.mark.anyio  # the async tests run on asyncio, the loop kgot uses

NOW = 1_700_000_000.0  # a fixed "now" for HTTP dates


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Flaky(Exception):
    """A failure worth retrying, optionally asking for a wait."""

    def __init__(self, retry_after: float | None = None) -> None:
        super().__init__("flaky")
        self.retry_after = retry_after


class Broken(Exception):
    """A failure not worth retrying."""


def is_flaky(error: Exception) -> bool:
    return isinstance(error, Flaky)


def asked_wait(error: Exception) -> float | None:
    return error.retry_after if isinstance(error, Flaky) else None


class Sleeps:
    """Records the waits instead of waiting."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


# --------------------------------------------------------------------------- Retry-After


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2", 2.0),
        (" 120 ", 120.0),
        ("0.25", 0.25),
        ("0", 0.0),
        ("-3", 0.0),  # never negative
        ("", None),
        (None, None),
        ("soon", None),
        ("nan", None),
        ("inf", None),
        ("1e999", None),
    ],
)
def test_retry_after_delta_seconds(value: str | None, expected: float | None) -> None:
    assert parse_retry_after(value) == expected


def test_retry_after_http_date_is_seconds_from_now() -> None:
    ahead = email.utils.formatdate(NOW + 30, usegmt=True)  # "Tue, 14 Nov 2023 22:13:50 GMT"
    assert parse_retry_after(ahead, now=NOW) == 30.0
    obsolete = email.utils.formatdate(NOW + 30, usegmt=True).replace(",", "")  # no comma
    assert parse_retry_after(obsolete, now=NOW) == 30.0


def test_retry_after_date_in_the_past_is_no_wait() -> None:
    past = email.utils.formatdate(NOW - 3600, usegmt=True)
    assert parse_retry_after(past, now=NOW) == 0.0


def test_retry_after_date_without_a_zone_is_gmt(monkeypatch: pytest.MonkeyPatch) -> None:
    # "-0000" (and a missing zone) parse to a naive datetime; read as local time it would be off
    # by the host's UTC offset. HTTP dates are GMT.
    naive = email.utils.formatdate(NOW + 60).replace("+0000", "-0000")
    assert naive.endswith("-0000")
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        assert parse_retry_after(naive, now=NOW) == 60.0
    finally:
        monkeypatch.undo()
        time.tzset()


def test_retry_after_ms_wins_and_headers_are_case_insensitive() -> None:
    headers = httpx.Headers({"Retry-After-Ms": "1500", "Retry-After": "9"})
    assert retry_after_from_headers(headers) == 1.5
    assert retry_after_from_headers(httpx.Headers({"RETRY-AFTER": "4"})) == 4.0
    # An unreadable millisecond header does not hide a readable Retry-After.
    assert retry_after_from_headers(httpx.Headers({"retry-after-ms": "x", "retry-after": "3"})) == 3
    assert retry_after_from_headers(httpx.Headers({})) is None
    assert retry_after_from_headers(None) is None


# --------------------------------------------------------------------------- the waits


def test_backoff_doubles_with_jitter_in_bounds_and_is_capped() -> None:
    policy = RetryPolicy(backoff_base=0.5, backoff_max=3.0)
    for retry, ceiling in [(1, 0.5), (2, 1.0), (3, 2.0), (4, 3.0), (50, 3.0)]:
        waits = [policy.delay(retry) for _ in range(300)]
        assert all(ceiling * 0.5 <= w <= ceiling for w in waits)
        assert max(waits) - min(waits) > ceiling * 0.2  # spread, not one value


def test_backoff_without_jitter_is_exact_and_never_overflows() -> None:
    policy = RetryPolicy(backoff_base=0.5, backoff_max=math.inf, jitter=False)
    assert [policy.delay(n) for n in (1, 2, 3)] == [0.5, 1.0, 2.0]
    assert math.isfinite(policy.delay(10_000))


def test_retry_after_replaces_the_backoff_capped_and_not_jittered() -> None:
    policy = RetryPolicy(backoff_base=100.0, retry_after_cap=10.0)
    assert policy.delay(1, retry_after=0.5) == 0.5
    assert policy.delay(1, retry_after=3600) == 10.0
    assert policy.delay(1, retry_after=-5) == 0.0
    assert policy.delay(1, retry_after=math.inf) == 10.0


def test_retry_after_may_only_extend_the_backoff() -> None:
    policy = RetryPolicy(backoff_base=1.0, jitter=False, retry_after_cap=5.0, retry_after="extends")
    assert policy.delay(1, retry_after=0) == 1.0
    assert policy.delay(1, retry_after=3) == 3.0
    assert policy.delay(1, retry_after=120) == 5.0
    assert policy.delay(4, retry_after=3) == 8.0


# --------------------------------------------------------------------------- the loop


async def test_tries_until_success_numbering_each_try() -> None:
    tried: list[int] = []
    sleeps = Sleeps()

    async def attempt(number: int) -> str:
        tried.append(number)
        if number < 3:
            raise Flaky(retry_after=0.25 * number)
        return "done"

    policy = RetryPolicy(max_retries=4)
    result = await retry_async(
        attempt, policy, retryable=is_flaky, retry_after=asked_wait, sleep=sleeps
    )
    assert result == "done"
    assert tried == [1, 2, 3]
    assert sleeps.waits == [0.25, 0.5]  # what each failure asked for


async def test_a_permanent_failure_is_raised_as_it_is_after_one_try() -> None:
    tried: list[int] = []

    async def attempt(number: int) -> None:
        tried.append(number)
        raise Broken("no")

    with pytest.raises(Broken, match="no"):
        await retry_async(attempt, RetryPolicy(), retryable=is_flaky, sleep=Sleeps())
    assert tried == [1]


async def test_exhaustion_says_how_many_tries_and_keeps_the_last_failure() -> None:
    failures: list[Flaky] = []
    sleeps = Sleeps()

    async def attempt(number: int) -> None:
        failures.append(Flaky())
        raise failures[-1]

    policy = RetryPolicy(max_retries=2, backoff_base=1.0, jitter=False)
    with pytest.raises(RetriesExhausted) as caught:
        await retry_async(attempt, policy, retryable=is_flaky, sleep=sleeps)
    assert caught.value.attempts == 3 and not caught.value.out_of_time
    assert caught.value.error is failures[-1] and caught.value.__cause__ is failures[-1]
    assert sleeps.waits == [1.0, 2.0]


async def test_no_wait_starts_that_would_end_past_the_deadline() -> None:
    tried: list[int] = []

    async def attempt(number: int) -> None:
        tried.append(number)
        raise Flaky(retry_after=0.05 if number == 1 else 5.0)

    # The first wait (0.05 s) fits in the 1 s budget; the second (5 s) would not: no third try.
    policy = RetryPolicy(max_retries=10, total_timeout=1.0)
    started = asyncio.get_running_loop().time()
    with pytest.raises(RetriesExhausted) as caught:
        await retry_async(attempt, policy, retryable=is_flaky, retry_after=asked_wait)
    assert tried == [1, 2]
    assert caught.value.attempts == 2 and caught.value.out_of_time
    assert asyncio.get_running_loop().time() - started < 1.0  # gave up instead of waiting


async def test_cancellation_is_never_retried() -> None:
    tried: list[int] = []

    async def attempt(number: int) -> None:
        tried.append(number)
        raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        await retry_async(attempt, RetryPolicy(), retryable=lambda error: True, sleep=Sleeps())
    assert tried == [1]


async def test_concurrent_calls_keep_their_own_count() -> None:
    # Calls overlapping on one loop (concurrent votes) each count their own tries and waits.
    async def flaky_until(last: int, tried: list[int], number: int) -> int:
        tried.append(number)
        await asyncio.sleep(0)
        if number < last:
            raise Flaky(retry_after=0)
        return number

    policy = RetryPolicy(max_retries=5)
    tries: list[list[int]] = [[], [], []]
    results = await asyncio.gather(
        *(
            retry_async(
                functools.partial(flaky_until, i + 2, tries[i]),
                policy,
                retryable=is_flaky,
                retry_after=asked_wait,
            )
            for i in range(3)
        )
    )
    assert results == [2, 3, 4]
    assert tries == [[1, 2], [1, 2, 3], [1, 2, 3, 4]]


# --------------------------------------------------------------------------- excerpts and causes


def test_body_excerpt_drops_markup_and_control_characters() -> None:
    page = b"<html><head><style>p{}</style></head><body><h1>502 Bad Gateway</h1>nginx</body>"
    assert body_excerpt(page) == '"502 Bad Gateway nginx"'
    assert body_excerpt(b"\x1b[2J\x00junk\xff") == '"[2J junk"'
    assert body_excerpt(b"") == "(empty body)"
    assert body_excerpt(b"<p> </p>") == "(no printable text)"
    long = body_excerpt("word " * 1000, limit=50)
    assert len(long) == 52 and long.endswith('…"')


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"error": {"message": "bad key", "type": "auth"}}, "bad key"),  # OpenAI
        ({"error": {"code": "badvalue", "info": "Unrecognized value"}}, "Unrecognized value"),
        ({"error": "Invalid API key."}, "Invalid API key."),
        ({"message": "boom"}, "boom"),
        ({"detail": "Not Found"}, "Not Found"),
        ({"detail": [{"msg": "field required"}]}, None),  # not a sentence
        ({"error": "  "}, None),
        (["error"], None),
        (None, None),
    ],
)
def test_error_message_of_a_json_body(data: object, message: str | None) -> None:
    assert error_message(data) == message


def test_answer_excerpt_prefers_the_json_message() -> None:
    assert answer_excerpt({"error": "slow\ndown"}, b'{"error": "slow\\ndown"}') == "slow down"
    assert answer_excerpt(None, b"<h1>Forbidden</h1>") == '"Forbidden"'


def test_one_line_cuts_with_an_ellipsis() -> None:
    assert one_line("a\n\tb\x00c") == "a b c"
    assert one_line("x" * 500, limit=10) == "x" * 9 + "…"


def test_cause_of_type_follows_causes_and_contexts_without_looping() -> None:
    inner = ConnectionRefusedError("refused")
    outer = RuntimeError("wrapped")
    outer.__cause__ = inner
    inner.__context__ = outer  # a cycle
    assert cause_of_type(outer, OSError) is inner
    assert cause_of_type(outer, KeyError) is None
