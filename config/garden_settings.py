"""garden's own settings (GARDEN_*): what a conversation, a file and a model's reply may hold,
the services garden reaches (MCP servers, webhooks, egress, Telegram), each owner's fair share,
the operator's credentials and the metrics. Imported whole by config/settings.py; a value that
cannot be used stops start-up."""

from __future__ import annotations

from pathlib import Path

from config.env import PRODUCTION, VAR_DIR, env, env_json
from config.validation import check_egress_and_keys

# --- conversations, files and model replies ---------------------------------------------------

# A 1:1 conversation is bounded before every call like a group room: the newest turns that fit.
GARDEN_CHAT_CAP_CHARS = env.int("GARDEN_CHAT_CAP_CHARS", default=24_000)
GARDEN_CHAT_MAX_TURNS = env.int("GARDEN_CHAT_MAX_TURNS", default=200)
# Turns of group threads each worker process keeps parsed (groups/thread_cache.py), so a step
# reads only the turns it has not seen; about 1-2 KiB a turn.
GARDEN_TRANSCRIPT_CACHE_TURNS = env.int("GARDEN_TRANSCRIPT_CACHE_TURNS", default=50_000)
# ... and at most about this many bytes of their text (a thread larger than either is read
# whole, not kept), so a few threads of long turns cannot fill a worker's memory.
GARDEN_TRANSCRIPT_CACHE_BYTES = env.int("GARDEN_TRANSCRIPT_CACHE_BYTES", default=64_000_000)
# Room websockets one person may have open at once in each web process (each holds a consumer
# and a channel-layer subscription); the next is closed with 4429.
GARDEN_MAX_SOCKETS_PER_USER = env.int("GARDEN_MAX_SOCKETS_PER_USER", default=20)
GARDEN_API_MAX_BODY_BYTES = env.int("GARDEN_API_MAX_BODY_BYTES", default=1_000_000)
GARDEN_API_MAX_JSON_DEPTH = env.int("GARDEN_API_MAX_JSON_DEPTH", default=32)
# Files attached to an owner's message (multipart POST …/messages, garden/attachments.py): at
# most this many per message, each at most this many bytes; a body larger than all of them
# together (plus GARDEN_API_MAX_BODY_BYTES for the text) is refused before it is parsed.
GARDEN_MAX_ATTACHMENTS = env.int("GARDEN_MAX_ATTACHMENTS", default=4)
GARDEN_ATTACHMENT_MAX_BYTES = env.int("GARDEN_ATTACHMENT_MAX_BYTES", default=5 * 1024 * 1024)
# All the files one owner has attached, together (they live in the shared database); clearing
# a group's history, or its purge, frees what was attached there.
GARDEN_MAX_ATTACHMENT_BYTES_PER_OWNER = env.int(
    "GARDEN_MAX_ATTACHMENT_BYTES_PER_OWNER", default=200 * 1024 * 1024
)
# Everything one owner keeps in the shared database, together (garden/storage.py): artifacts
# (documents agents write, kept tool outputs, attached files), memory notes and stored turns.
# A tool's write past it is the tool's error (STORAGE_FULL), an owner's message 409.
GARDEN_MAX_STORAGE_BYTES_PER_OWNER = env.int(
    "GARDEN_MAX_STORAGE_BYTES_PER_OWNER", default=200 * 1024 * 1024
)
# The pictures and PDFs of the room passed to a model as content parts, the most recent first;
# older ones (and any the room's cap turned into references) reach it as one-line references.
GARDEN_MAX_INLINE_ATTACHMENTS = env.int("GARDEN_MAX_INLINE_ATTACHMENTS", default=4)
# Django's own upload limits: form fields (not files) held in memory at most this large, and an
# uploaded file kept in memory up to this size and written to a temporary file beyond it.
DATA_UPLOAD_MAX_MEMORY_SIZE = env.int("DATA_UPLOAD_MAX_MEMORY_SIZE", default=2_621_440)
FILE_UPLOAD_MAX_MEMORY_SIZE = env.int("FILE_UPLOAD_MAX_MEMORY_SIZE", default=1_048_576)

GARDEN_RUNTIME_ROOT = Path(env.str("GARDEN_RUNTIME_ROOT", default=str(VAR_DIR / "runtime")))
GARDEN_NAME = env.str("GARDEN_NAME", default="garden")
GARDEN_PROVIDER_RETRY_ATTEMPTS = env.int("GARDEN_PROVIDER_RETRY_ATTEMPTS", default=3)
GARDEN_PROVIDER_RETRY_SECONDS = env.float("GARDEN_PROVIDER_RETRY_SECONDS", default=120.0)
# http.fetch: the whole fetch (every redirect hop, the body) within this many seconds, and at
# most this many bytes of body read.
GARDEN_TOOL_HTTP_TIMEOUT = env.float("GARDEN_TOOL_HTTP_TIMEOUT", default=20.0)
# The account "Test" (one tiny call from the web process) waits at most this long.
GARDEN_ACCOUNT_TEST_TIMEOUT = env.float("GARDEN_ACCOUNT_TEST_TIMEOUT", default=15.0)
GARDEN_TOOL_HTTP_MAX_BYTES = env.int("GARDEN_TOOL_HTTP_MAX_BYTES", default=100_000)
# A model's reply larger than this is refused unread (a provider's JSON is a few KB to a few MB).
GARDEN_PROVIDER_MAX_REPLY_BYTES = env.int("GARDEN_PROVIDER_MAX_REPLY_BYTES", default=8_000_000)
# A reply is also bounded by what its call asked for (garden/providers/_http.py reply_limit):
# at most max_tokens x GARDEN_REPLY_CHARS_PER_TOKEN characters of text, tool names and
# arguments, plus GARDEN_REPLY_SLACK_CHARS for tool-call JSON (a group step asks for 1,024
# tokens: 24,192 characters), never more than GARDEN_PROVIDER_MAX_REPLY_BYTES. A stream is cut
# there (REPLY_TOO_LARGE, the call counted: the model ran) and not asked again.
GARDEN_REPLY_CHARS_PER_TOKEN = env.int("GARDEN_REPLY_CHARS_PER_TOKEN", default=8)
GARDEN_REPLY_SLACK_CHARS = env.int("GARDEN_REPLY_SLACK_CHARS", default=16_000)
# ... and at most this many bytes on the wire for each of those characters (streamed events
# wrap each token in a few hundred bytes; events with no text count only here): 1.5 MB for a
# group step, never more than GARDEN_PROVIDER_MAX_REPLY_BYTES.
GARDEN_REPLY_WIRE_BYTES_PER_CHAR = env.int("GARDEN_REPLY_WIRE_BYTES_PER_CHAR", default=64)
# A turn keeps at most this many characters of a reply's text in the thread (it is pushed,
# cached and re-sent whole); the rest of a longer one is kept as an artifact the turn refers
# to. Never more than GARDEN_PROVIDER_MAX_REPLY_BYTES.
GARDEN_TURN_MAX_CHARS = min(
    env.int("GARDEN_TURN_MAX_CHARS", default=100_000), GARDEN_PROVIDER_MAX_REPLY_BYTES
)
# The draft of a reply being generated (groups/loop/drafts.py) carries only what is new since the
# last one, and stops after this many characters: the turn lands whole when the call ends.
GARDEN_DRAFT_MAX_CHARS = env.int("GARDEN_DRAFT_MAX_CHARS", default=20_000)

# --- MCP servers -----------------------------------------------------------------------------
# Owners add remote MCP servers (Streamable HTTP; their URLs pass the egress policy, see
# GARDEN_EGRESS_ALLOW_MCP) and enable their tools on agents (docs/tools.md). Each owner has at
# most GARDEN_MAX_MCP_SERVERS_PER_OWNER; a call (or a listing) gives up after
# GARDEN_MCP_TIMEOUT seconds and refuses an answer larger than GARDEN_MCP_MAX_RESULT_BYTES.
GARDEN_MAX_MCP_SERVERS_PER_OWNER = env.int("GARDEN_MAX_MCP_SERVERS_PER_OWNER", default=10)
GARDEN_MCP_TIMEOUT = env.float("GARDEN_MCP_TIMEOUT", default=30.0)
GARDEN_MCP_MAX_RESULT_BYTES = env.int("GARDEN_MCP_MAX_RESULT_BYTES", default=4_000_000)
# A listed tool's input schema is offered only within these limits (else the tool is kept by
# name, marked unusable with why; garden/tools/schema_limits.py): its JSON size, and — with
# every local $ref expanded in place (a cycle is refused) — its parts, patterns, nesting depth
# and allOf/anyOf/oneOf/not nesting. Validating a call's arguments against any tool's schema
# stops after GARDEN_TOOL_SCHEMA_SECONDS (SCHEMA_TOO_SLOW), whatever schema was stored.
GARDEN_MCP_SCHEMA_MAX_BYTES = env.int("GARDEN_MCP_SCHEMA_MAX_BYTES", default=32_768)
GARDEN_MCP_SCHEMA_MAX_NODES = env.int("GARDEN_MCP_SCHEMA_MAX_NODES", default=5_000)
GARDEN_MCP_SCHEMA_MAX_PATTERNS = env.int("GARDEN_MCP_SCHEMA_MAX_PATTERNS", default=32)
GARDEN_MCP_SCHEMA_MAX_DEPTH = env.int("GARDEN_MCP_SCHEMA_MAX_DEPTH", default=32)
GARDEN_MCP_SCHEMA_MAX_COMPOSITION_DEPTH = env.int(
    "GARDEN_MCP_SCHEMA_MAX_COMPOSITION_DEPTH", default=6
)
GARDEN_TOOL_SCHEMA_SECONDS = env.float("GARDEN_TOOL_SCHEMA_SECONDS", default=0.5)
# Servers the operator offers, like GARDEN_CREDENTIALS: a JSON object of name ->
# {"url": …, "headers": {"Authorization": "env:VAR"}, "users": "*" | [usernames], "groups": […]}
# or, the operator's alone, a local server over stdio: {"command": …, "args": […], "env": {…}}.
GARDEN_MCP_SERVERS = env_json("GARDEN_MCP_SERVERS")

# --- webhooks (groups/services/webhooks.py, docs/webhooks.md) --------------------------------
# An owner has at most GARDEN_MAX_WEBHOOKS_PER_OWNER endpoints. A delivery is tried at most
# GARDEN_WEBHOOK_MAX_ATTEMPTS times within GARDEN_WEBHOOK_RETRY_SECONDS of its event, after the
# pauses of GARDEN_WEBHOOK_BACKOFF (seconds; the last repeats); each try ends within
# GARDEN_WEBHOOK_TIMEOUT. An endpoint whose last GARDEN_WEBHOOK_DISABLE_AFTER deliveries all
# gave up is disabled. Finished deliveries are kept GARDEN_WEBHOOK_KEEP_DAYS days. One owner's
# tries hold at most GARDEN_MAX_WEBHOOKS_IN_FLIGHT_PER_OWNER worker threads at once (each up to
# GARDEN_WEBHOOK_TIMEOUT); a further try sends nothing and comes back when a slot frees. Values
# out of range stop start-up (garden.E012).
GARDEN_MAX_WEBHOOKS_PER_OWNER = env.int("GARDEN_MAX_WEBHOOKS_PER_OWNER", default=10)
GARDEN_MAX_WEBHOOKS_IN_FLIGHT_PER_OWNER = env.int(
    "GARDEN_MAX_WEBHOOKS_IN_FLIGHT_PER_OWNER", default=2
)
GARDEN_WEBHOOK_TIMEOUT = env.float("GARDEN_WEBHOOK_TIMEOUT", default=10.0)
GARDEN_WEBHOOK_BACKOFF = [
    float(s)
    for s in env.list("GARDEN_WEBHOOK_BACKOFF", default=["5", "30", "120", "600", "1800", "3600"])
]
GARDEN_WEBHOOK_RETRY_SECONDS = env.float("GARDEN_WEBHOOK_RETRY_SECONDS", default=6 * 3600.0)
GARDEN_WEBHOOK_MAX_ATTEMPTS = env.int("GARDEN_WEBHOOK_MAX_ATTEMPTS", default=10)
GARDEN_WEBHOOK_DISABLE_AFTER = env.int("GARDEN_WEBHOOK_DISABLE_AFTER", default=5)
GARDEN_WEBHOOK_KEEP_DAYS = env.int("GARDEN_WEBHOOK_KEEP_DAYS", default=14)
# Past this many of an owner's deliveries pending (waiting for a slot or a retry), a new one is
# recorded given up at once (WEBHOOK_BACKLOG_FULL) and not sent; one still pending
# GARDEN_WEBHOOK_RETRY_SECONDS after its event gives up (WEBHOOK_EXPIRED).
GARDEN_WEBHOOK_MAX_PENDING_PER_OWNER = env.int("GARDEN_WEBHOOK_MAX_PENDING_PER_OWNER", default=200)

# --- egress ---------------------------------------------------------------------------------
# Outbound requests an owner can direct (a model account's base URL, http.fetch) never reach
# loopback, private, link-local, unique-local, multicast or metadata addresses, except the
# hosts and networks named here (comma-separated: "10.0.0.0/8,ollama.internal,*.corp.example").
# GARDEN_EGRESS_ALLOW applies to both; GARDEN_EGRESS_ALLOW_PROVIDERS to model accounts only
# (a local Ollama or vLLM), so tools cannot reach them.
GARDEN_EGRESS_ALLOW = env.list("GARDEN_EGRESS_ALLOW", default=[])
GARDEN_EGRESS_ALLOW_PROVIDERS = env.list("GARDEN_EGRESS_ALLOW_PROVIDERS", default=[])
# The same for the Telegram Bot API only (a self-hosted Bot API server on the private network).
GARDEN_EGRESS_ALLOW_TELEGRAM = env.list("GARDEN_EGRESS_ALLOW_TELEGRAM", default=[])
# The same for owners' MCP servers only (an MCP server on the private network that owners may
# add, without opening it to http.fetch).
GARDEN_EGRESS_ALLOW_MCP = env.list("GARDEN_EGRESS_ALLOW_MCP", default=[])
# The same for owners' webhook endpoints only (a receiver on the private network).
GARDEN_EGRESS_ALLOW_WEBHOOK = env.list("GARDEN_EGRESS_ALLOW_WEBHOOK", default=[])
# Name lookups (garden/egress/resolver.py): each runs on a thread of its own, at most
# GARDEN_EGRESS_DNS_PER_OWNER at once for one owner and one purpose, and at most the pool of
# its purpose per process, so a name that never answers costs only the owner who named it and
# tool lookups never take the capacity model calls and the Bot API need. A lookup gives up
# after GARDEN_EGRESS_DNS_TIMEOUT seconds (or the request's own deadline, if sooner).
GARDEN_EGRESS_DNS_TIMEOUT = env.float("GARDEN_EGRESS_DNS_TIMEOUT", default=5.0)
GARDEN_EGRESS_DNS_PER_OWNER = env.int("GARDEN_EGRESS_DNS_PER_OWNER", default=4)
GARDEN_EGRESS_DNS_PROVIDER_THREADS = env.int("GARDEN_EGRESS_DNS_PROVIDER_THREADS", default=32)
GARDEN_EGRESS_DNS_TOOL_THREADS = env.int("GARDEN_EGRESS_DNS_TOOL_THREADS", default=16)
GARDEN_EGRESS_DNS_TELEGRAM_THREADS = env.int("GARDEN_EGRESS_DNS_TELEGRAM_THREADS", default=4)
# A response sent gzip- or deflate-packed (garden asks for none) is unpacked by garden itself,
# in bounded pieces, up to this many bytes a response (each reader's own smaller cap still
# applies; an MCP exchange's unpacked bytes count against its GARDEN_MCP_MAX_RESULT_BYTES).
GARDEN_EGRESS_MAX_DECODED_BYTES = env.int("GARDEN_EGRESS_MAX_DECODED_BYTES", default=32_000_000)
# A web request that opens an egress connection while holding a database connection: an error
# (DB_CONNECTION_HELD) when on (the tests), a logged error otherwise (garden/db_release.py).
GARDEN_STRICT_DB_RELEASE = env.bool("GARDEN_STRICT_DB_RELEASE", default=False)

# --- Telegram approvals (telegram_approvals/, docs/telegram.md) ------------------------------
# Unset token: no Telegram surface (the dashboard page says so, the webhook answers 404).
# The token is a secret: it is never logged (telegram_approvals.bot redacts it) nor returned.
GARDEN_TELEGRAM_BOT_TOKEN = env.str("GARDEN_TELEGRAM_BOT_TOKEN", default="")
# Telegram sends it back in X-Telegram-Bot-Api-Secret-Token on every webhook update; unset,
# the webhook refuses every update (polling with `manage.py telegram_poll` needs none).
GARDEN_TELEGRAM_WEBHOOK_SECRET = env.str("GARDEN_TELEGRAM_WEBHOOK_SECRET", default="")
# The Bot API's base URL (a self-hosted Bot API server, or a test's); it passes the egress
# policy like any other destination.
GARDEN_TELEGRAM_API_URL = env.str("GARDEN_TELEGRAM_API_URL", default="https://api.telegram.org")
# Shown on the link page ("send /start <code> to @name"); unset, it is asked of getMe once.
GARDEN_TELEGRAM_BOT_USERNAME = env.str("GARDEN_TELEGRAM_BOT_USERNAME", default="")
# How long a link code from the dashboard stays good.
GARDEN_TELEGRAM_LINK_CODE_SECONDS = env.int("GARDEN_TELEGRAM_LINK_CODE_SECONDS", default=600)
# Every Bot API call (send, edit, answer) finishes within this many seconds.
GARDEN_TELEGRAM_TIMEOUT = env.float("GARDEN_TELEGRAM_TIMEOUT", default=15.0)


# --- fair share: quotas and limits per owner --------------------------------------------------
# API requests per signed-in person ("N/sec|min|hour|day"); empty turns a scope off.
GARDEN_THROTTLE_RATES = {
    "read": env.str("GARDEN_THROTTLE_READ", default="600/min"),
    "write": env.str("GARDEN_THROTTLE_WRITE", default="120/min"),
    "messages": env.str("GARDEN_THROTTLE_MESSAGES", default="30/min"),
    # An export builds a whole history in memory (up to GARDEN_EXPORT_MAX_BYTES).
    "exports": env.str("GARDEN_THROTTLE_EXPORTS", default="10/min"),
    # A search reads every owner's index entries for its words before the owner filter.
    "search": env.str("GARDEN_THROTTLE_SEARCH", default="60/min"),
}
# Scripted accounts are a development and demo tool: ordinary users may create them only where
# this is on (staff always may, in the admin).
# The dashboard's one-click starter team answers from offline scripts: each answer takes this
# long, written in pieces, so a first user can watch who works (`make demo` is not paced).
GARDEN_STARTER_PACE_SECONDS = env.float("GARDEN_STARTER_PACE_SECONDS", default=1.0)
GARDEN_ALLOW_SCRIPTED_ACCOUNTS = env.bool("GARDEN_ALLOW_SCRIPTED_ACCOUNTS", default=not PRODUCTION)
GARDEN_MAX_QUEUED_PER_GROUP = env.int("GARDEN_MAX_QUEUED_PER_GROUP", default=10)
GARDEN_MAX_QUEUED_PER_OWNER = env.int("GARDEN_MAX_QUEUED_PER_OWNER", default=30)
GARDEN_MAX_GROUPS_PER_OWNER = env.int("GARDEN_MAX_GROUPS_PER_OWNER", default=50)
# The next group-list read after a deleted group's minute removes it for good (at most this
# many per read, so a read stays quick; a worker takes any left over, and beat the unread).
GARDEN_PURGE_ON_READ = env.int("GARDEN_PURGE_ON_READ", default=5)
# One page of a room's transcript (GET …/messages) carries at most this many characters of
# turns (and at most 500 turns); the page after it is one request away.
GARDEN_ROOM_PAGE_CHARS = env.int("GARDEN_ROOM_PAGE_CHARS", default=2_000_000)
# An export of a room's history (GET …/export) is built whole in memory and sent once the
# database connection is handed back: a history that would pass this many bytes is refused
# (413 EXPORT_TOO_LARGE) instead.
GARDEN_EXPORT_MAX_BYTES = env.int("GARDEN_EXPORT_MAX_BYTES", default=20_000_000)
# The largest room cap an owner may set on a group (characters of the room sent per call):
# every member turn re-sends the room, so the cap is also a cost the operator bounds.
GARDEN_MAX_ROOM_CAP_CHARS = env.int("GARDEN_MAX_ROOM_CAP_CHARS", default=400_000)
GARDEN_MAX_AGENTS_PER_OWNER = env.int("GARDEN_MAX_AGENTS_PER_OWNER", default=100)
GARDEN_MAX_MODEL_ACCOUNTS_PER_OWNER = env.int("GARDEN_MAX_MODEL_ACCOUNTS_PER_OWNER", default=20)
GARDEN_MAX_TOKENS_PER_OWNER = env.int("GARDEN_MAX_TOKENS_PER_OWNER", default=20)
# A person is in at most GARDEN_MAX_TEAM_WORKSPACES_PER_PERSON team workspaces (besides their
# own) when they make another, and a team workspace has at most GARDEN_MAX_PEOPLE_PER_WORKSPACE.
GARDEN_MAX_TEAM_WORKSPACES_PER_PERSON = env.int("GARDEN_MAX_TEAM_WORKSPACES_PER_PERSON", default=10)
GARDEN_MAX_PEOPLE_PER_WORKSPACE = env.int("GARDEN_MAX_PEOPLE_PER_WORKSPACE", default=200)
# An invitation's link works once, for GARDEN_INVITATION_DAYS unless its admin chose otherwise
# (at most GARDEN_INVITATION_MAX_DAYS); a workspace has at most this many open at once.
GARDEN_INVITATION_DAYS = env.int("GARDEN_INVITATION_DAYS", default=7)
GARDEN_INVITATION_MAX_DAYS = env.int("GARDEN_INVITATION_MAX_DAYS", default=30)
GARDEN_MAX_OPEN_INVITATIONS_PER_WORKSPACE = env.int(
    "GARDEN_MAX_OPEN_INVITATIONS_PER_WORKSPACE", default=50
)
# Every access token expires: after the days its owner chose, at most GARDEN_TOKEN_MAX_DAYS,
# or GARDEN_TOKEN_DEFAULT_DAYS when they chose none. Making one needs the current password.
GARDEN_TOKEN_DEFAULT_DAYS = env.int("GARDEN_TOKEN_DEFAULT_DAYS", default=90)
GARDEN_TOKEN_MAX_DAYS = env.int("GARDEN_TOKEN_MAX_DAYS", default=366)
GARDEN_MAX_MISSIONS_PER_OWNER = env.int("GARDEN_MAX_MISSIONS_PER_OWNER", default=20)
GARDEN_MIN_MISSION_INTERVAL_SECONDS = env.int(
    "GARDEN_MIN_MISSION_INTERVAL_SECONDS", default=300 if PRODUCTION else 60
)
# Model calls one owner may have in flight across every worker (Redis-backed with REDIS_URL);
# further steps of that owner wait, re-checking every GARDEN_CALL_SLOT_RETRY_SECONDS, while
# other owners' steps run.
GARDEN_MAX_CALLS_IN_FLIGHT_PER_OWNER = env.int("GARDEN_MAX_CALLS_IN_FLIGHT_PER_OWNER", default=4)
GARDEN_CALL_SLOT_RETRY_SECONDS = env.float("GARDEN_CALL_SLOT_RETRY_SECONDS", default=1.0)
# A step that finds no free slot looks again after a pause that grows (doubling, jittered)
# from GARDEN_CALL_SLOT_RETRY_SECONDS up to this; it writes and projects nothing meanwhile.
GARDEN_SLOT_RETRY_MAX_SECONDS = env.float("GARDEN_SLOT_RETRY_MAX_SECONDS", default=10.0)
# Replies whose tools one owner may have running at once across every worker (each holds a
# worker thread for up to GARDEN_TOOLS_SECONDS_PER_STEP); further ones wait, their reply
# recorded, and run their tools when a slot frees, while other owners' steps run.
GARDEN_MAX_TOOLS_IN_FLIGHT_PER_OWNER = env.int("GARDEN_MAX_TOOLS_IN_FLIGHT_PER_OWNER", default=2)
# Tokens (input + output, as providers count them) one owner's calls may spend on each of the
# operator's credentials (GARDEN_CREDENTIALS) per minute and per UTC day; 0 is unlimited. A
# staff member sets an owner's own in the admin (Token budgets). Past the minute's, a call
# waits for the next minute (waiting_for: "token_budget"); past the day's, it is not made
# (TOKEN_BUDGET_SPENT: a group request ends, a member's turn is skipped, a 1:1 reply is a
# notice). Owners' own keys are not counted.
GARDEN_TOKEN_BUDGET_PER_MINUTE = env.int("GARDEN_TOKEN_BUDGET_PER_MINUTE", default=200_000)
GARDEN_TOKEN_BUDGET_PER_DAY = env.int("GARDEN_TOKEN_BUDGET_PER_DAY", default=5_000_000)
# What calls cost (garden/pricing.py, docs/operations.md "Costs"): the genai-prices table
# bundled with the installed package, under these overrides for self-hosted or negotiated
# models, which win over it. A JSON object of model (or "openai/<model>", "anthropic/<model>")
# -> dollars per million tokens: {"llama3.1:8b": {"input_per_mtok": "0", "output_per_mtok":
# "0"}, "gpt-4o": {"input_per_mtok": "2.0", "output_per_mtok": "8.0"}}. Checked at start-up
# (garden.E011). A model in neither is recorded as unpriced, never as free.
GARDEN_MODEL_PRICES = env_json("GARDEN_MODEL_PRICES")


# --- model-account keys ---------------------------------------------------------------------
# The operator's named credentials (JSON): which key, for which provider and base URL, for whom.
#   {"openai": {"provider": "openai", "env": "OPENAI_API_KEY", "users": "*"},
#    "team-claude": {"provider": "anthropic", "file": "/run/secrets/anthropic",
#                    "groups": ["research"]}}
# An account using one sends its key only to the credential's base_url (default: the
# provider's public API). Owners never name an environment variable.
GARDEN_CREDENTIALS = env_json("GARDEN_CREDENTIALS")
# Fernet keys (comma-separated, `python -c "from cryptography.fernet import Fernet;
# print(Fernet.generate_key().decode())"`) for the keys owners paste: the first encrypts,
# all decrypt; put a new key first and run `manage.py rotate_api_keys` to rotate. Unset in
# development, a key derived from SECRET_KEY is used; unset in production, pasting is refused.
GARDEN_FERNET_KEYS = env.list("GARDEN_FERNET_KEYS", default=[])
check_egress_and_keys(globals())

# --- metrics (Prometheus; docs/operations.md, "Metrics") -------------------------------------
# Off unless one of the first three is set. GARDEN_METRICS_TOKEN: the bearer secret /metrics asks
# for (unset: /metrics is 404). GARDEN_METRICS_DIR (or PROMETHEUS_MULTIPROC_DIR): a directory the
# processes of one host (one container) share, so one scrape adds them all up. GARDEN_METRICS_PORT:
# a worker also serves its host's samples on this port (on GARDEN_METRICS_ADDR), for a host with
# no web process, and only on a loopback address unless GARDEN_METRICS_TOKEN is set.
# GARDEN_METRICS_FAILURE_LIMIT: wrong bearers one client address may try within
# GARDEN_METRICS_FAILURE_WINDOW_SECONDS (on /metrics and on the port together) before both answer
# it 429 with Retry-After, the token not compared, until the window ends (0: no limit).
GARDEN_METRICS_TOKEN = env.str("GARDEN_METRICS_TOKEN", default="")
GARDEN_METRICS_DIR = env.str(
    "GARDEN_METRICS_DIR", default=env.str("PROMETHEUS_MULTIPROC_DIR", default="")
)
GARDEN_METRICS_PORT = env.int("GARDEN_METRICS_PORT", default=0)
GARDEN_METRICS_ADDR = env.str("GARDEN_METRICS_ADDR", default="127.0.0.1")
GARDEN_METRICS_FAILURE_LIMIT = env.int("GARDEN_METRICS_FAILURE_LIMIT", default=10)
GARDEN_METRICS_FAILURE_WINDOW_SECONDS = env.int("GARDEN_METRICS_FAILURE_WINDOW_SECONDS", default=60)
