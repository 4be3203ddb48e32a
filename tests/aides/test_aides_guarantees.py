"""What an operator relies on to leave an aide running (issue 25), on SQLite and PostgreSQL:

* a poll's text that no database could store (NUL, a lone surrogate) is stored cleaned, and an
  item the database refuses fails alone, named in the source's error;
* item ids are a source's own: one feed cannot suppress another's entry;
* a delivery try is one call however many HTTP retries it made, failed tries back off, idle
  cycles do not push an undelivered digest out of the retry window, and of several workers
  exactly one sends a delivery (an email abandoned mid-send is never sent again);
* a cycle's spend is written as it happens: a killed cycle shows and counts what it spent,
  and is marked killed.
"""

from __future__ import annotations

import asyncio
import http.server
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest

from kgot.aides import aide_rows, create_aide
from kgot.aides.outputs import deliver_once
from kgot.aides.schema import AIDE_TABLES
from kgot.config import Settings
from kgot.persistence import Store

START = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def _dead_owner() -> str:
    """A process of this machine that has ended (a pid no process can have)."""
    from kgot.persistence.owner import Owner, current_owner

    me = Owner.parse(current_owner())
    assert me is not None
    return str(Owner(me.host, me.boot_id, 2**22 + 1, "1", me.pid_namespace))


DEAD_OWNER = _dead_owner()


def _item(item_id: str, text: str, title: str = "t") -> Any:
    # Not a SourceItem: that cleans its texts itself, and this is the store's own guarantee.
    return SimpleNamespace(
        item_id=item_id,
        title=title,
        text=text,
        source_ref=f"https://feed.example/{item_id}",
        published_at=None,
        kind="rss",
    )


def test_a_poll_with_unstorable_text_records_every_item_cleaned(
    store: Store, settings: Settings, tmp_path: Path
) -> None:
    aide = create_aide(store, "nul", "acme", settings=settings)
    source = aide.add_source("search", "acme news")
    items = [
        _item("nul", "before\x00after", title="raw \x00"),
        _item("surrogate\ud800", "lone \ud800 surrogate"),
        _item("fine", "an ordinary entry"),
    ]
    recorded = aide_rows.record_poll(
        store, aide.row, source, items, cursor={"n": 1}, error=None, now=START
    )
    assert recorded.added == 3 and recorded.error is None
    rows = {row.item_id: row for row in aide_rows.items(store, aide.row)}
    assert rows["nul"].text == "before\ufffdafter" and rows["nul"].title == "raw \ufffd"
    assert rows["surrogate\ufffd"].text == "lone \ufffd surrogate"
    assert rows["fine"].status == "new"
    [kept] = aide_rows.sources(store, aide.row)
    assert kept.cursor == {"n": 1} and kept.failures == 0


def test_an_item_the_database_refuses_fails_alone_and_is_named(
    store: Store, settings: Settings
) -> None:
    aide = create_aide(store, "refuse", "acme", settings=settings)
    source = aide.add_source("search", "acme news")
    # A non-string id is refused by the database driver (PostgreSQL) or a type check: it
    # stands for any entry the database will not take.
    bad = SimpleNamespace(**{**vars(_item("x", "text")), "published_at": "not a time"})
    recorded = aide_rows.record_poll(
        store,
        aide.row,
        source,
        [_item("first", "one"), bad, _item("last", "two")],
        cursor={"n": 2},
        error=None,
        now=START,
    )
    assert recorded.added == 2
    assert recorded.error is not None and "1 item(s) could not be stored" in recorded.error
    assert "'x'" in recorded.error
    assert sorted(row.item_id for row in aide_rows.items(store, aide.row)) == ["first", "last"]
    [kept] = aide_rows.sources(store, aide.row)
    assert kept.cursor == {"n": 2} and kept.last_error == recorded.error


def test_item_ids_are_per_source_so_one_feed_cannot_suppress_another(
    store: Store, settings: Settings
) -> None:
    aide = create_aide(store, "twofeeds", "acme", settings=settings)
    genuine = aide.add_source("search", "genuine")
    hostile = aide.add_source("search", "hostile")
    guid = "urn:uuid:future-entry"
    # The hostile feed publishes the genuine feed's next GUID first.
    first = aide_rows.record_poll(
        store, aide.row, hostile, [_item(guid, "forged text")], cursor={}, error=None, now=START
    )
    second = aide_rows.record_poll(
        store, aide.row, genuine, [_item(guid, "the real entry")], cursor={}, error=None, now=START
    )
    again = aide_rows.record_poll(
        store, aide.row, genuine, [_item(guid, "the real entry")], cursor={}, error=None, now=START
    )
    assert (first.added, second.added, again.added) == (1, 1, 0)
    texts = {(row.source_id, row.text) for row in aide_rows.items(store, aide.row)}
    assert texts == {(hostile, "forged text"), (genuine, "the real entry")}


# --------------------------------------------------------------------------- deliveries


def _digest_cycle(store: Store, aide: Any, at: datetime) -> int:
    cycle = aide_rows.start_cycle(store, aide.row, at)
    digest = {"aide": aide.name, "digest": f"made at {at.isoformat()}", "facts": []}
    aide_rows.finish_cycle(
        store,
        cycle,
        {"status": "finished", "made_digest": 1, "report": {"digest": digest}},
    )
    return cycle


@pytest.mark.slow
def test_idle_cycles_do_not_push_an_undelivered_digest_out_of_the_window(
    store: Store, settings: Settings
) -> None:
    aide = create_aide(store, "idle", "acme", settings=settings)
    made = _digest_cycle(store, aide, START)
    for minute in range(1, 3 * aide_rows.REDELIVER_CYCLES):
        idle = aide_rows.start_cycle(store, aide.row, START + timedelta(minutes=minute))
        aide_rows.finish_cycle(store, idle, {"status": "finished", "report": {"digest": None}})
    assert [cycle for cycle, _, _ in aide_rows.recent_digests(store, aide.row, 10)] == [made]


@pytest.mark.slow
def test_a_try_is_one_call_and_failed_tries_back_off_until_ten(
    store: Store, settings: Settings
) -> None:
    aide = create_aide(store, "backoff", "acme", settings=settings)
    output = aide.add_output("stdout")
    key, owner = "aide 1/cycle 1", "worker-a"
    now = START
    for number in range(1, aide_rows.MAX_DELIVERIES + 1):
        # Not before its backoff ran out …
        assert aide_rows.claim_delivery(
            store, aide.row, output, key, 1, owner=owner, now=now, at_most_once=False
        )
        aide_rows.record_delivery(
            store, output, key, owner=owner, ok=False, error="HTTP 500", now=now
        )
        state = aide_rows.delivery_state(store, output, key)
        assert state.attempts == number  # however many HTTP requests the try made
        delay = aide_rows.retry_delay(number)
        assert not aide_rows.claim_delivery(
            store, aide.row, output, key, 1, owner=owner, now=now + delay / 2, at_most_once=False
        )
        now += delay
    assert aide_rows.retry_delay(1) == timedelta(minutes=1)
    assert aide_rows.retry_delay(30) == aide_rows.RETRY_MAX
    # … and given up after the tenth.
    assert not aide_rows.claim_delivery(
        store,
        aide.row,
        output,
        key,
        1,
        owner=owner,
        now=now + timedelta(days=1),
        at_most_once=False,
    )


def test_a_claim_left_by_a_dead_worker_is_taken_over_but_never_for_email(
    store: Store, settings: Settings
) -> None:
    from kgot.persistence.owner import current_owner

    aide = create_aide(store, "claims", "acme", settings=settings)
    hook = aide.add_output("webhook", "http://127.0.0.1:9/hook")
    mail = aide.add_output(
        "smtp", "smtp://127.0.0.1:2525", to="me@example.com", sender="kgot@example.com"
    )

    def claim(output: int, key: str, owner: str, at: datetime) -> bool:
        return aide_rows.claim_delivery(
            store, aide.row, output, key, 1, owner=owner, now=at, at_most_once=output == mail
        )

    soon = START + timedelta(minutes=1)
    for output in (hook, mail):
        # A live worker's claim holds against the others until it runs out.
        assert claim(output, "live", current_owner(), START)
        assert not claim(output, "live", "other", soon)
        # A dead worker's claim does not hold …
        assert claim(output, "dead", DEAD_OWNER, START)
    # … a webhook's is taken over (sent again under the same key, which receivers
    # de-duplicate on), an email's is given up: it may have gone out already.
    assert claim(hook, "dead", "other", soon)
    assert not claim(mail, "dead", "other", soon)
    given_up = aide_rows.delivery_state(store, mail, "dead")
    assert given_up.attempts == aide_rows.MAX_DELIVERIES and "not sent twice" in given_up.error
    later = START + aide_rows.DELIVERY_CLAIM + timedelta(seconds=1)
    assert claim(hook, "live", "other", later)


class _Hook(http.server.BaseHTTPRequestHandler):
    posts: ClassVar[list[str]] = []
    lock = threading.Lock()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        with self.lock:
            self.posts.append(self.headers.get("X-Kgot-Delivery", ""))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def hook_url() -> Iterator[str]:
    _Hook.posts = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hook)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.slow
def test_three_workers_delivering_at_once_send_each_digest_once(
    store: Store, store_url: str, settings: Settings, hook_url: str
) -> None:
    from kgot.persistence import open_store

    aide = create_aide(store, "crowd", "acme", settings=settings)
    output_id = aide.add_output("webhook", hook_url)
    [output] = aide_rows.outputs(store, aide.row)
    assert output.id == output_id
    keys = [f"aide {aide.row.id}/cycle {n}" for n in range(1, 7)]
    barrier = threading.Barrier(3)
    errors: list[BaseException] = []

    def worker() -> None:
        own = open_store(store_url)  # each worker its own engine and connections
        try:
            barrier.wait()
            for key in keys:
                asyncio.run(
                    deliver_once(
                        own,
                        aide.row,
                        output,
                        key,
                        {"digest": key},
                        cycle_id=1,
                        now=START,
                        settings=settings,
                    )
                )
        except BaseException as error:
            errors.append(error)
        finally:
            own.close()

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors, errors
    assert sorted(_Hook.posts) == sorted(keys)  # each once, none twice
    for key in keys:
        state = aide_rows.delivery_state(store, output.id, key)
        assert state.ok and state.attempts == 1 and state.claim_owner is None


# --------------------------------------------------------------------------- spend


def test_spend_is_written_as_it_happens_and_a_killed_cycle_is_marked_and_counted(
    store: Store, settings: Settings
) -> None:
    aide = create_aide(store, "spender", "acme", settings=settings)
    killed = aide_rows.start_cycle(store, aide.row, START, DEAD_OWNER)
    for _ in range(3):
        aide_rows.add_spend(
            store, killed, calls=1, input_tokens=100, output_tokens=10, cost_usd=0.5, now=START
        )
    # The worker died before its cycle ended: its spend is there, and budgets count it.
    midnight = START.replace(hour=0, minute=0)
    assert aide_rows.cost_since(store, aide.row, midnight) == pytest.approx(1.5)
    later = aide_rows.start_cycle(store, aide.row, START + timedelta(minutes=5), "owner")
    assert aide_rows.cost_since(store, aide.row, midnight, excluding=later) == pytest.approx(1.5)
    rows = {row.id: row for row in aide_rows.cycles(store, aide.row)}
    assert rows[killed].status == "killed" and "worker died" in rows[killed].stop_reason
    assert rows[killed].llm_calls == 3 and rows[killed].input_tokens == 300
    assert rows[later].status == "running"
    # An unknown price makes the cycle's cost unknown, as its final figures would.
    aide_rows.add_spend(
        store, later, calls=1, input_tokens=1, output_tokens=1, cost_usd=None, now=START
    )
    assert aide_rows.cycle_spend(store, later).cost_usd is None


@pytest.mark.slow
def test_a_cycle_writes_each_model_calls_spend_before_it_ends(
    tmp_path: Path, store: Store, settings: Settings
) -> None:
    """The runtime's ledger listener: the cycle row holds the calls while the cycle runs."""
    from kgot.tests.aides.aide_scripts import inbox, model

    seen: list[int] = []
    aide = create_aide(store, "live", "acme", settings=settings)
    scripted = model()
    aide.models = {"planning": scripted, "execution": scripted}
    aide.add_source("dir", str(inbox(tmp_path / "inbox", ["acme.md"])))
    original = aide_rows.add_spend

    def spy(*args: Any, **kwargs: Any) -> None:
        original(*args, **kwargs)
        seen.append(aide_rows.cycle_spend(store, args[1]).llm_calls)

    aide_rows.add_spend = spy  # type: ignore[assignment]
    try:
        report = aide.run_cycle()
    finally:
        aide_rows.add_spend = original  # type: ignore[assignment]
    assert report.llm_calls >= 2 and seen == list(range(1, report.llm_calls + 1))
    [row] = aide_rows.cycles(store, aide.row)
    assert row.llm_calls == report.llm_calls and row.status == "finished"
    assert row.owner is not None


def test_the_item_tables_scope_ids_by_source() -> None:
    index = {
        tuple(column.name for column in ix.columns)
        for ix in AIDE_TABLES.aide_items.indexes
        if ix.unique
    }
    assert ("aide_id", "source_id", "item_id") in index


class _Bomb(http.server.BaseHTTPRequestHandler):
    """A webhook refusing every delivery with a gzip bomb: 50 MB of zeros, 50 KB sent."""

    body = b""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(400)
        self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.mark.slow
def test_a_webhook_answering_with_a_compression_bomb_is_read_within_a_bound(
    settings: Settings,
) -> None:
    import gzip
    import tracemalloc

    from kgot.aides.outputs import deliver_async

    _Bomb.body = gzip.compress(b"0" * 50_000_000, compresslevel=9)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Bomb)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/hook"
        tracemalloc.start()
        result = asyncio.run(
            deliver_async(
                "webhook", {"url": url}, {"digest": "x"}, delivery_key="k", settings=settings
            )
        )
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    finally:
        server.shutdown()
        server.server_close()
    assert not result.ok and result.error and "HTTP 400" in result.error
    assert peak < 8_000_000, f"peak {peak} bytes"


class _Wordy(http.server.BaseHTTPRequestHandler):
    """A webhook refusing every delivery with 10 KB of plain text, its reason first."""

    body = b"signature mismatch: the X-Kgot-Signature header does not match. " + b"x" * 10_240

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(403)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.mark.slow
def test_a_webhook_refusing_with_a_long_answer_shows_its_start(settings: Settings) -> None:
    """Only the answer's first 4 KB are read, and they are what the error line quotes."""
    from kgot.aides.outputs import deliver_async

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Wordy)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/hook"
        result = asyncio.run(
            deliver_async(
                "webhook", {"url": url}, {"digest": "x"}, delivery_key="k", settings=settings
            )
        )
    finally:
        server.shutdown()
        server.server_close()
    assert not result.ok and result.error and "HTTP 403" in result.error
    assert '"signature mismatch: the X-Kgot-Signature header does not match.' in result.error
