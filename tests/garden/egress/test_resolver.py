"""Name lookups within each owner's fair share: one owner's names that never answer hold only
that owner's lookups (and only their purpose's threads); every other owner's lookup, and every
model call's and Bot API's lookup, resolves while they hang. A hung lookup is refused by name
at its timeout and gives its slot back when the resolver returns.

The resolver function is the test's own: it blocks on an Event for the slow owner's name and
answers 127.0.0.1 for every other name, so nothing leaves the machine.
"""

from __future__ import annotations

import socket
import threading

import httpcore
import pytest

from garden import egress
from garden.providers import AccountConfig, ChatMessage, ChatRequest, TextBlock, get_provider
from garden.providers.types import ConfirmedRejection
from garden.tools import ToolContext
from garden.tools.web import http_fetch
from tests.conftest import wait_for
from tests.garden.providers.httpserver import Respond, ScriptedServer
from tests.support.providers import openai_reply

SLOW = "never-answers.slow.test"


class BlockingLookup:
    """getaddrinfo-shaped: blocks on ``release`` for SLOW, answers 127.0.0.1 for other names;
    counts the SLOW lookups that have started."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.started = 0
        self._lock = threading.Lock()

    def __call__(self, host, port, *args, **kwargs):
        if host == SLOW:
            with self._lock:
                self.started += 1
            self.release.wait(60)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port))]


@pytest.fixture
def lookup():
    blocking = BlockingLookup()
    yield blocking
    blocking.release.set()


def _in_threads(count: int, target) -> list[threading.Thread]:
    threads = [threading.Thread(target=target, daemon=True) for _ in range(count)]
    for thread in threads:
        thread.start()
    return threads


def test_a_hung_lookup_is_refused_by_name_at_its_timeout_and_frees_its_slot_when_it_returns(
    settings, lookup
):
    settings.GARDEN_EGRESS_DNS_PER_OWNER = 1
    resolver = egress.Resolver(lookup)
    with pytest.raises(httpcore.ConnectTimeout, match=SLOW):
        resolver.resolve(SLOW, 443, purpose="provider", owner_id=1, timeout=0.2)
    # Still in the resolver's hands: counted against owner 1, whose next lookup waits for it
    # and is refused naming the limit it met; owner 2 is not touched.
    assert resolver.in_flight(purpose="provider", owner_id=1) == 1
    with pytest.raises(httpcore.ConnectTimeout, match="GARDEN_EGRESS_DNS_PER_OWNER"):
        resolver.resolve("api.example.test", 443, purpose="provider", owner_id=1, timeout=0.2)
    assert resolver.resolve("api.example.test", 443, purpose="provider", owner_id=2, timeout=5)
    lookup.release.set()
    wait_for(lambda: resolver.in_flight(purpose="provider") == 0)
    assert resolver.resolve("api.example.test", 443, purpose="provider", owner_id=1, timeout=5)


def test_tool_lookups_that_hang_leave_capacity_for_model_calls_and_the_bot_api(settings, lookup):
    settings.GARDEN_EGRESS_DNS_PER_OWNER = 2
    settings.GARDEN_EGRESS_DNS_TOOL_THREADS = 4
    resolver = egress.Resolver(lookup)
    failures: list[Exception] = []

    def slow_tool_lookup(owner_id: int):
        try:
            resolver.resolve(SLOW, 80, purpose="tool", owner_id=owner_id, timeout=30)
        except Exception as exc:  # released at the end of the test
            failures.append(exc)

    threads = [
        threading.Thread(target=slow_tool_lookup, args=(o,), daemon=True) for o in (1, 1, 2, 2)
    ]
    for thread in threads:
        thread.start()
    wait_for(lambda: lookup.started == 4)
    assert resolver.in_flight(purpose="tool") == 4
    # Every tool thread is taken; a third owner's tool lookup is refused naming that limit…
    with pytest.raises(httpcore.ConnectTimeout, match="all 4 tool lookups"):
        resolver.resolve("wiki.example.test", 80, purpose="tool", owner_id=3, timeout=0.2)
    # …while model calls and the Bot API resolve as if the tools were not there.
    assert resolver.resolve("api.example.test", 443, purpose="provider", owner_id=3, timeout=5)
    assert resolver.resolve("api.telegram.test", 443, purpose="telegram", owner_id=None, timeout=5)
    lookup.release.set()
    for thread in threads:
        thread.join(10)
    assert failures == [] and resolver.in_flight(purpose="tool") == 0


def test_one_owners_hung_names_do_not_delay_another_owners_fetch(settings, monkeypatch):
    """Through http.fetch and the process's resolver: owner 1 fetches eight names that never
    answer (as many lookups as the old shared pool had threads); owner 2's fetch of an allowed
    server still resolves and answers, and owner 1's own extra fetch is the one that waits."""
    settings.GARDEN_EGRESS_ALLOW = ["127.0.0.1"]
    settings.GARDEN_TOOL_HTTP_TIMEOUT = 2.0
    settings.GARDEN_EGRESS_DNS_PER_OWNER = 8
    settings.GARDEN_EGRESS_DNS_TOOL_THREADS = 16
    real = socket.getaddrinfo
    blocking = BlockingLookup()

    def getaddrinfo(host, port, *args, **kwargs):
        if host in (SLOW, "inside.fast.test"):
            return blocking(host, port)
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    server = ScriptedServer()
    server.default = Respond(200, b"owner two's page")
    slow_url = f"http://{SLOW}:{server.port}/"
    outcomes: list = []
    try:
        threads = _in_threads(
            8,
            lambda: outcomes.append(
                http_fetch(
                    ToolContext(owner_id=1, agent_id=1, conversation_id=1), {"url": slow_url}
                )
            ),
        )
        wait_for(lambda: blocking.started == 8)
        theirs = http_fetch(
            ToolContext(owner_id=2, agent_id=2, conversation_id=2),
            {"url": f"http://inside.fast.test:{server.port}/"},
        )
        assert not theirs.is_error, theirs.content
        assert theirs.content.endswith("owner two's page")
        settings.GARDEN_TOOL_HTTP_TIMEOUT = 0.3
        mine = http_fetch(ToolContext(owner_id=1, agent_id=1, conversation_id=1), {"url": slow_url})
        assert mine.code == "FETCH_TIMEOUT"
        for thread in threads:
            thread.join(10)
        assert [o.code for o in outcomes] == ["FETCH_TIMEOUT"] * 8
    finally:
        blocking.release.set()
        server.close()
    wait_for(lambda: egress.policy.RESOLVER.in_flight(purpose="tool") == 0)
    assert [r.path for r in server.requests] == ["/"]


def test_a_model_call_counts_its_lookup_against_its_accounts_owner(settings, monkeypatch):
    """Through the OpenAI-compatible adapter: owner 1's accounts name a host that never
    answers, eight calls at once; owner 2's call to an allowed local server is answered, and
    owner 1's own next call is the one refused (could not connect: its lookups are in flight)."""
    settings.GARDEN_EGRESS_ALLOW_PROVIDERS = ["127.0.0.1"]
    settings.GARDEN_PROVIDER_RETRY_ATTEMPTS = 1
    settings.GARDEN_EGRESS_DNS_PER_OWNER = 8
    settings.GARDEN_EGRESS_DNS_PROVIDER_THREADS = 16
    real = socket.getaddrinfo
    blocking = BlockingLookup()

    def getaddrinfo(host, port, *args, **kwargs):
        if host in (SLOW, "models.fast.test"):
            return blocking(host, port)
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    server = ScriptedServer()
    server.reply(200, openai_reply("owner two's answer"))
    chat = ChatRequest(system="", messages=(ChatMessage("user", (TextBlock("hi"),)),))

    def call(owner_id: int, host: str, timeout: float = 2.0):
        config = AccountConfig(
            provider="openai",
            model="m",
            base_url=f"http://{host}:{server.port}/v1",
            timeout=timeout,
            owner_id=owner_id,
        )
        return get_provider(config).complete(chat)

    refused: list = []

    def slow_call():
        try:
            call(1, SLOW)
        except ConfirmedRejection as exc:
            refused.append(exc)

    try:
        threads = _in_threads(8, slow_call)
        wait_for(lambda: blocking.started == 8)
        assert call(2, "models.fast.test").text == "owner two's answer"
        with pytest.raises(ConfirmedRejection, match="GARDEN_EGRESS_DNS_PER_OWNER"):
            call(1, "models.fast.test", timeout=0.3)
        for thread in threads:
            thread.join(10)
        assert len(refused) == 8 and all(SLOW in str(exc) for exc in refused)
    finally:
        blocking.release.set()
        server.close()
    wait_for(lambda: egress.policy.RESOLVER.in_flight(purpose="provider") == 0)
    assert len(server.requests) == 1


def test_a_lookup_that_gets_no_thread_gives_its_slot_back(settings, lookup, monkeypatch):
    """A process out of threads (RuntimeError from Thread.start) refuses the lookup and counts
    nothing: the owner's next lookup is not held by one that never ran."""
    settings.GARDEN_EGRESS_DNS_PER_OWNER = 1
    resolver = egress.Resolver(lookup)

    def no_thread(self):
        raise RuntimeError("can't start new thread")

    with monkeypatch.context() as patched:
        patched.setattr(threading.Thread, "start", no_thread)
        with pytest.raises(RuntimeError):
            resolver.resolve("api.example.test", 443, purpose="provider", owner_id=1, timeout=1)
    assert resolver.in_flight(purpose="provider", owner_id=1) == 0
    assert resolver.resolve("api.example.test", 443, purpose="provider", owner_id=1, timeout=5)
