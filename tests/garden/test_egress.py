"""The egress policy: http.fetch and a model account's base URL never reach loopback, private,
link-local, unique-local or metadata addresses — directly, by a name, by another spelling of
the address or through a redirect — unless the operator's allowlist names them; bodies are
capped and a fetch ends at its total time limit.

Every refused destination is checked to have seen no connection attempt at all: the refusal
happens before a socket connects. The check names the destination it is about (a step also
talks to Redis and PostgreSQL, and another test's worker may be connecting meanwhile). The only servers that answer are this test's own, on
127.0.0.1 and 127.0.0.2.
"""

from __future__ import annotations

import ipaddress
import socket

import httpx
import pytest

from garden import egress
from garden.errors import ServiceError
from garden.models import ModelAccount
from garden.services.accounts import model_account_create
from garden.tools import ToolContext
from garden.tools.web import http_fetch
from tests.garden.providers.httpserver import Drip, Respond, ScriptedServer
from tests.groups.helpers import answered_by
from tests.support.providers import openai_reply

CTX = ToolContext(owner_id=1, agent_id=1, conversation_id=1)


def saved_account(owner, base_url: str, name: str = "old") -> ModelAccount:
    """An OpenAI account at ``base_url`` saved as a row, past the checks of saving (one made
    before the policy existed, or while the operator allowed it): each call checks again."""
    return ModelAccount.objects.create(
        owner=owner, name=name, provider="openai", model="m", base_url=base_url, timeout_seconds=5
    )


REFUSED = [
    "http://127.0.0.1:{port}/",
    "http://localhost:{port}/",
    "http://LOCALHOST.:{port}/",
    "http://[::1]:{port}/",
    "http://[::ffff:127.0.0.1]:{port}/",
    "http://[::ffff:7f00:1]:{port}/",
    "http://0.0.0.0:{port}/",
    "http://2130706433:{port}/",  # 127.0.0.1 as one number
    "http://0x7f.1:{port}/",
    "http://10.1.2.3/",
    "http://172.16.0.1/",
    "http://192.168.1.1/",
    "http://100.64.0.1/",  # shared address space (carrier NAT)
    "http://169.254.169.254/latest/meta-data/",
    "http://[fd00:ec2::254]/latest/meta-data/",
    "http://100.100.100.200/",
    "http://[fe80::1]/",
    "http://[fc00::1]/",
    "http://[64:ff9b::a00:1]/",  # NAT64 of 10.0.0.1
    "http://[2002:a00:1::]/",  # 6to4 of 10.0.0.1
    "http://224.0.0.1/",
]


class Connects(list):
    """Every outbound socket connect made during the test (by any thread), in order."""

    def to(self, host: str | None = None, port: int | None = None) -> list:
        """The connects to ``host`` (any spelling of the address) and/or ``port``."""

        def same(a: str, b: str) -> bool:
            try:
                return ipaddress.ip_address(a) == ipaddress.ip_address(b)
            except ValueError:
                return a == b

        return [
            address
            for address in self
            if isinstance(address, tuple)
            and (host is None or same(str(address[0]), host))
            and (port is None or address[1] == port)
        ]


def _port(url: str) -> int:
    parsed = httpx.URL(url)
    return parsed.port or (443 if parsed.scheme == "https" else 80)


@pytest.fixture
def connects(monkeypatch) -> Connects:
    attempts = Connects()
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex

    def connect(self, address):
        attempts.append(address)
        return real_connect(self, address)

    def connect_ex(self, address):
        attempts.append(address)
        return real_connect_ex(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    return attempts


@pytest.fixture
def server():
    s = ScriptedServer()
    s.default = Respond(200, b"hello from the inside")
    yield s
    s.close()


@pytest.mark.parametrize("url", REFUSED)
def test_fetch_refuses_internal_destinations_before_connecting(url, server, connects):
    url = url.format(port=server.port)
    outcome = http_fetch(CTX, {"url": url})
    assert outcome.is_error and outcome.code == "EGRESS_REFUSED", outcome.content
    assert outcome.content.startswith("EGRESS_REFUSED: ")
    assert connects.to(port=_port(url)) == [] and server.requests == []


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "::1",
        "10.0.0.7",
        "169.254.169.254",
        "fd12::1",
        "::ffff:192.168.0.1",
        "0.0.0.0",
        "ff02::1",
    ],
)
def test_every_internal_address_has_a_named_reason(address):
    import ipaddress

    assert egress.refusal_reason(ipaddress.ip_address(address))


@pytest.mark.parametrize("address", ["93.184.216.34", "2606:4700::1111", "8.8.8.8"])
def test_public_addresses_pass(address):
    import ipaddress

    assert egress.refusal_reason(ipaddress.ip_address(address)) is None


def test_the_operators_allowlist_opens_exactly_what_it_names(server, settings):
    settings.GARDEN_EGRESS_ALLOW = ["127.0.0.1/32"]
    outcome = http_fetch(CTX, {"url": f"{server.url}/"})
    assert not outcome.is_error and "hello from the inside" in outcome.content
    # A neighbour of the allowed address is still refused.
    other = http_fetch(CTX, {"url": f"http://127.0.0.2:{server.port}/"})
    assert other.code == "EGRESS_REFUSED"


def test_a_redirect_hop_to_a_refused_address_is_refused(settings, connects):
    settings.GARDEN_EGRESS_ALLOW = ["127.0.0.1"]
    inside = ScriptedServer(host="127.0.0.2")
    entry = ScriptedServer()
    try:
        entry.reply(302, b"", headers={"Location": f"{inside.url}/secret"})
        entry.reply(302, b"", headers={"Location": "http://169.254.169.254/latest/meta-data/"})
        first = http_fetch(CTX, {"url": f"{entry.url}/a"})
        second = http_fetch(CTX, {"url": f"{entry.url}/b"})
    finally:
        inside.close()
        entry.close()
    assert first.code == second.code == "EGRESS_REFUSED"
    assert inside.requests == []
    assert [r.path for r in entry.requests] == ["/a", "/b"]
    assert connects.to("127.0.0.2") == [] and connects.to("169.254.169.254") == []
    assert len(connects.to("127.0.0.1", entry.port)) >= 1


def test_the_connection_goes_to_the_address_that_was_checked(settings, monkeypatch):
    """A name whose second DNS answer differs (rebinding) still reaches the first one."""
    settings.GARDEN_EGRESS_ALLOW = ["127.0.0.1/32"]
    checked = ScriptedServer()
    checked.default = Respond(200, b"checked")
    rebound = ScriptedServer(host="127.0.0.2", port=checked.port)
    answers = iter(["127.0.0.1"] + ["127.0.0.2"] * 10)
    real = socket.getaddrinfo

    def getaddrinfo(host, port, *args, **kwargs):
        if host == "rebind.test":
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (next(answers), port))]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    try:
        outcome = http_fetch(CTX, {"url": f"http://rebind.test:{checked.port}/"})
    finally:
        checked.close()
        rebound.close()
    assert outcome.content.endswith("checked"), outcome.content
    assert rebound.requests == [] and len(checked.requests) == 1
    assert checked.requests[0].headers["host"] == f"rebind.test:{checked.port}"


def test_a_name_resolving_to_a_mixed_answer_is_refused_whole(settings, monkeypatch, connects):
    monkeypatch.setattr(
        socket,
        "getaddrinfo",
        lambda host, port, *a, **k: [
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.216.34", port)),
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.0.0.1", port)),
        ],
    )
    outcome = http_fetch(CTX, {"url": "http://mixed.test/"})
    assert outcome.code == "EGRESS_REFUSED" and "mixed.test leads to" in outcome.content
    assert connects.to("10.0.0.1") == [] and connects.to("93.184.216.34") == []


def test_a_body_is_read_only_up_to_the_cap(server, settings):
    settings.GARDEN_EGRESS_ALLOW = ["127.0.0.1"]
    settings.GARDEN_TOOL_HTTP_MAX_BYTES = 1000
    server.reply(200, b"y" * 2_000_000)
    outcome = http_fetch(CTX, {"url": server.url})
    assert "[clipped at 1,000 bytes]" in outcome.content
    assert outcome.content.split("\n", 1)[1] == "y" * 1000


def test_a_server_that_never_finishes_is_cut_at_the_total_time_limit(server, settings):
    settings.GARDEN_EGRESS_ALLOW = ["127.0.0.1"]
    settings.GARDEN_TOOL_HTTP_TIMEOUT = 1.0
    server.push(Drip(interval=0.05))
    outcome = http_fetch(CTX, {"url": server.url})
    assert outcome.code == "FETCH_TIMEOUT", outcome.content


def test_only_http_and_https_are_fetched(connects):
    for url in ("file:///etc/passwd", "gopher://127.0.0.1:70/", "ftp://example.com/"):
        with pytest.raises(egress.EgressRefused):
            egress.check_url(url, "tool")
    assert connects.to(port=70) == [] and connects.to(port=21) == []


@pytest.mark.parametrize(
    "entry", ["bad host!", "*.", "*", "-lead.example", "a..b", "10.0.0.1:0", "host:99999"]
)
def test_malformed_allowlists_are_named(entry):
    with pytest.raises(ValueError, match="not a"):
        egress.parse_allowlist(["ok.example", entry])


def test_allowlist_entries_match_hosts_suffixes_networks_and_ports():
    import ipaddress

    allow = egress.parse_allowlist(
        [
            "10.0.0.0/8",
            "ollama.internal:11434",
            "*.corp.example",
            "[fd00::5]:8000",
            "192.168.1.20:80",
        ]
    )
    assert allow.names("OLLAMA.internal.", 11434) and not allow.names("ollama.internal", 22)
    assert allow.names("gpu.corp.example", 1) and not allow.names("corp.example.evil", 1)
    assert not allow.names("evilcorp.example", 1)
    assert allow.holds(ipaddress.ip_address("10.9.8.7"), 5432)
    assert allow.holds(ipaddress.ip_address("fd00::5"), 8000)
    assert not allow.holds(ipaddress.ip_address("fd00::5"), 8001)
    assert not allow.holds(ipaddress.ip_address("192.168.1.20"), 6379)


def test_a_port_scoped_allowance_opens_only_that_port(server, settings):
    settings.GARDEN_EGRESS_ALLOW = [f"127.0.0.1:{server.port}"]
    assert not http_fetch(CTX, {"url": f"{server.url}/"}).is_error
    other = ScriptedServer()
    try:
        assert http_fetch(CTX, {"url": f"{other.url}/"}).code == "EGRESS_REFUSED"
    finally:
        other.close()


def test_a_compressed_bomb_is_unpacked_only_up_to_the_cap(server, settings):
    import gzip

    settings.GARDEN_EGRESS_ALLOW = ["127.0.0.1"]
    settings.GARDEN_TOOL_HTTP_MAX_BYTES = 10_000
    bomb = gzip.compress(b"z" * 200_000_000)  # ~200 KB on the wire, 200 MB unpacked
    server.reply(200, bomb, headers={"Content-Encoding": "gzip", "Content-Type": "text/plain"})
    server.reply(302, bomb, headers={"Content-Encoding": "gzip", "Location": "/after"})
    server.reply(200, b"fine")
    first = http_fetch(CTX, {"url": f"{server.url}/bomb"})
    assert "[clipped at 10,000 bytes]" in first.content
    assert first.content.split("\n", 1)[1] == "z" * 10_000
    # A redirect's own body is never read at all.
    assert http_fetch(CTX, {"url": f"{server.url}/redirect"}).content.endswith("fine")
    server.reply(200, b"x", headers={"Content-Encoding": "br"})
    assert http_fetch(CTX, {"url": server.url}).code == "RESPONSE_ENCODING_REFUSED"


def test_cookies_set_for_one_fetch_never_ride_along_with_another(server, settings):
    settings.GARDEN_EGRESS_ALLOW = ["127.0.0.1"]
    server.reply(200, b"set", headers={"Set-Cookie": "session=owner-a-secret; Path=/"})
    server.reply(200, b"again")
    http_fetch(ToolContext(owner_id=1, agent_id=1, conversation_id=1), {"url": server.url})
    http_fetch(ToolContext(owner_id=2, agent_id=2, conversation_id=2), {"url": server.url})
    assert "cookie" not in server.requests[1].headers


def test_a_slow_name_lookup_ends_at_the_deadline(settings, monkeypatch, connects):
    import threading

    settings.GARDEN_TOOL_HTTP_TIMEOUT = 0.5
    release = threading.Event()
    real = socket.getaddrinfo

    def slow(host, *args, **kwargs):
        if host == "slow-dns.test":
            release.wait(10)
        return (
            real("127.0.0.1", *args[1:], **kwargs)
            if host == "slow-dns.test"
            else real(host, *args, **kwargs)
        )

    monkeypatch.setattr(socket, "getaddrinfo", slow)
    try:
        outcome = http_fetch(CTX, {"url": "http://slow-dns.test/"})
    finally:
        release.set()
    assert outcome.code == "FETCH_TIMEOUT", outcome.content
    assert connects.to(port=80) == []


@pytest.mark.parametrize(
    "url",
    [
        "http://user:pw@example.com/v1",
        "https://example.com/v1?x=1",
        "https://example.com/v1#frag",
        "http://[fec0::1]/v1",
    ],
)
def test_a_base_url_with_credentials_a_query_or_a_site_local_address_is_refused(url):
    with pytest.raises(egress.EgressRefused):
        egress.check_url(url, "provider")


# --- a model account's base URL -------------------------------------------------------------


@pytest.mark.django_db
def test_a_base_url_at_an_internal_address_is_refused_when_saved(owner, connects):
    for url in (
        "http://169.254.169.254/v1",
        "http://127.0.0.1:11434/v1",
        "http://[::1]/v1",
        "http://localhost:8000/v1",
        "http://10.0.0.5/v1",
    ):
        with pytest.raises(ServiceError) as refused:
            model_account_create(owner=owner, name="x", provider="openai", model="m", base_url=url)
        assert refused.value.code == "EGRESS_REFUSED" and refused.value.field == "base_url"
    assert not ModelAccount.objects.filter(owner=owner, provider="openai").exists()
    for port in (80, 11434, 8000):
        assert connects.to(port=port) == []


@pytest.mark.django_db
def test_api_names_the_refused_base_url(api):
    response = api.post(
        "/api/model-accounts",
        {
            "name": "x",
            "provider": "openai",
            "model": "m",
            "base_url": "http://[::ffff:169.254.169.254]/v1",
        },
    )
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == "base_url"
    assert response.json()["code"] == "EGRESS_REFUSED"


@pytest.mark.django_db
def test_a_model_call_to_a_loopback_base_url_is_refused_without_a_connection(
    owner, connects, server
):
    # A row saved before the policy existed (or while the operator allowed it).
    account = saved_account(owner, f"{server.url}/v1")
    reply = answered_by(owner, account)
    assert reply.kind == "notice" and "EGRESS_REFUSED" in reply.text
    assert server.requests == [] and connects.to("127.0.0.1", server.port) == []


@pytest.mark.django_db
def test_the_provider_allowlist_admits_a_local_model_server_but_not_tools(owner, server, settings):
    settings.GARDEN_EGRESS_ALLOW_PROVIDERS = ["127.0.0.1"]
    server.reply(200, openai_reply("Hi from Ollama", usage=None))
    account = model_account_create(
        owner=owner,
        name="ollama",
        provider="openai",
        model="llama3",
        base_url=f"{server.url}/v1",
        timeout_seconds=5,
    )
    reply = answered_by(owner, account)
    assert reply.kind == "turn" and reply.text == "Hi from Ollama"
    assert http_fetch(CTX, {"url": f"{server.url}/"}).code == "EGRESS_REFUSED"
    assert len(server.requests) == 1


@pytest.mark.django_db
def test_a_provider_that_never_finishes_is_cut_at_the_accounts_timeout(owner, server, settings):
    settings.GARDEN_EGRESS_ALLOW_PROVIDERS = ["127.0.0.1"]
    settings.GARDEN_PROVIDER_RETRY_ATTEMPTS = 1
    server.push(Drip(interval=0.05))
    account = model_account_create(
        owner=owner,
        name="slow",
        provider="openai",
        model="m",
        base_url=f"{server.url}/v1",
        timeout_seconds=1,
    )
    reply = answered_by(owner, account)
    assert reply.kind == "notice" and "PROVIDER_TIMEOUT" in reply.text


@pytest.mark.django_db
def test_the_account_test_names_the_refusal_and_the_success(
    api, owner, server, settings, stranger, connects
):
    forced = saved_account(owner, f"{server.url}/v1")
    refused = api.post(f"/api/model-accounts/{forced.pk}/test").json()
    assert refused["ok"] is False and refused["code"] == "EGRESS_REFUSED"
    assert server.requests == [] and connects.to("127.0.0.1", server.port) == []
    settings.GARDEN_EGRESS_ALLOW_PROVIDERS = ["127.0.0.1"]
    server.reply(200, openai_reply("OK", usage=None))
    works = api.post(f"/api/model-accounts/{forced.pk}/test").json()
    assert works == {"ok": True, "code": None, "message": "The model answered: 'OK'"}
    theirs = ModelAccount.objects.create(owner=stranger, name="x", provider="openai", model="m")
    assert api.post(f"/api/model-accounts/{theirs.pk}/test").status_code == 404


def test_an_allowed_name_still_never_reaches_loopback_or_metadata(settings, monkeypatch, server):
    """``*.corp.example`` opens private addresses under that name, not the machine itself nor
    a metadata service, unless the operator allows that address too."""
    settings.GARDEN_EGRESS_ALLOW = ["*.corp.example", "localhost"]
    answers = {
        "wiki.corp.example": "127.0.0.1",
        "meta.corp.example": "169.254.169.254",
        "v6meta.corp.example": "fd00:ec2::254",
    }
    real = socket.getaddrinfo

    def getaddrinfo(host, port, *args, **kwargs):
        if host in answers:
            family = socket.AF_INET6 if ":" in answers[host] else socket.AF_INET
            return [(family, socket.SOCK_STREAM, 6, "", (answers[host], port))]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    for url in (
        f"http://wiki.corp.example:{server.port}/",
        f"http://localhost:{server.port}/",
        "http://meta.corp.example/latest/meta-data/",
        "http://v6meta.corp.example/latest/meta-data/",
    ):
        outcome = http_fetch(CTX, {"url": url})
        assert outcome.code == "EGRESS_REFUSED", (url, outcome.content)
        assert "allows the name" in outcome.content
    assert server.requests == []
    # A private address under the allowed name is what the allowance is for.
    answers["wiki.corp.example"] = "10.0.0.9"
    assert egress.check_host("wiki.corp.example", 9, "tool") == [ipaddress.ip_address("10.0.0.9")]
    # Naming the address itself opens it.
    settings.GARDEN_EGRESS_ALLOW = ["*.corp.example", "127.0.0.1"]
    answers["wiki.corp.example"] = "127.0.0.1"
    outcome = http_fetch(CTX, {"url": f"http://wiki.corp.example:{server.port}/"})
    assert outcome.content.endswith("hello from the inside"), outcome.content


@pytest.mark.django_db(transaction=True)
def test_no_refusal_shows_what_a_name_resolved_to(api, owner, settings, monkeypatch, server):
    """What an internal name resolves to is not the owner's to learn: adding an MCP server, an
    account's Test and a fetch each refuse a name that leads to loopback or a private address
    by name and setting, never by the address (an allowed name included)."""
    from tests.mcp_server import mcp_server

    answers = {"vm.corp.test": "127.0.0.1", "db.corp.test": "10.11.12.13"}
    real = socket.getaddrinfo

    def getaddrinfo(host, port, *args, **kwargs):
        if host in answers:
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (answers[host], port))]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    settings.GARDEN_EGRESS_ALLOW_MCP = ["allowed.corp.test"]
    answers["allowed.corp.test"] = "127.0.0.2"
    said = []
    with mcp_server() as mcp:
        for host in ("vm.corp.test", "db.corp.test", "allowed.corp.test"):
            url = mcp.url.replace("127.0.0.1", host)
            added = api.post("/api/mcp-servers", {"name": host.split(".")[0], "url": url})
            assert added.status_code == 400 and added.json()["code"] == "EGRESS_REFUSED", added
            said.append(added.json()["message"])
        assert mcp.seen_headers == []
    account = saved_account(owner, f"http://db.corp.test:{server.port}/v1", name="inside")
    tested = api.post(f"/api/model-accounts/{account.pk}/test").json()
    assert tested["ok"] is False and tested["code"] == "EGRESS_REFUSED"
    said.append(tested["message"])
    fetched = http_fetch(CTX, {"url": f"http://vm.corp.test:{server.port}/"})
    assert fetched.code == "EGRESS_REFUSED"
    said.append(fetched.content)
    assert server.requests == []
    for message in said:
        assert not any(address in message for address in answers.values()), message
        assert "GARDEN_EGRESS_ALLOW" in message, message
    assert all(".corp.test" in message for message in said[:3] + said[4:])
    assert "allows the name allowed.corp.test" in said[2]
