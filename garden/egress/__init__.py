"""The egress policy: every outbound HTTP request an owner can direct (a model account's base
URL, ``http.fetch``), and the Telegram Bot API's, goes through one client built here.

- The host is resolved and every address it resolves to is checked before any connection:
  loopback, private, link-local, unique-local, multicast, reserved and cloud metadata
  addresses are refused (IPv4 and IPv6, IPv4-mapped and NAT64/6to4 forms unwrapped), unless
  the operator's allowlist (``GARDEN_EGRESS_ALLOW``; ``GARDEN_EGRESS_ALLOW_PROVIDERS`` for
  model accounts only, ``GARDEN_EGRESS_ALLOW_TELEGRAM`` for the Bot API only) names the host
  or a network holding the address (``policy``).
- The socket connects to the address that was checked, so there is no window in which a
  second DNS answer (rebinding) could send it elsewhere; TLS still verifies the host name.
- The check runs at every connection, so every redirect hop is checked too (``client``).
- Every read and write is bounded by the deadline of the request in progress
  (``deadline()``), so a server dripping one byte at a time cannot hold a worker past it;
  ``read_capped`` stops reading a body at a byte cap (``iter_capped``, the same as it
  arrives).
- A body sent packed anyway (gzip or deflate, one layer) is unpacked by the client's transport
  in bounded pieces, never past GARDEN_EGRESS_MAX_DECODED_BYTES (an async client's unpacked
  bytes also count against its ``ReadBudget``), before httpx sees it; stacked or other
  encodings are refused by name (``EncodingRefused``, ``DecodedTooLarge``).
- Name lookups count against the owner the request is made for (``deadline(owner_id=…)``) and
  its purpose, each on a thread of its own with no shared queue (``resolver``), so one
  owner's name that never answers delays no one else's.
"""

from garden.egress.client import (
    AsyncEgressBackend,
    BodyTooLarge,
    DecodedTooLarge,
    EgressBackend,
    EncodingRefused,
    ReadBudget,
    build_async_client,
    build_client,
    iter_capped,
    read_capped,
    shared,
)
from garden.egress.deadline import deadline
from garden.egress.policy import (
    METADATA_NETWORKS,
    Address,
    Allowlist,
    EgressRefused,
    Network,
    Purpose,
    allowlist_for,
    check_host,
    check_url,
    parse_allowlist,
    refusal_reason,
    resolve,
)
from garden.egress.resolver import Resolver

__all__ = [
    "METADATA_NETWORKS",
    "Address",
    "Allowlist",
    "AsyncEgressBackend",
    "BodyTooLarge",
    "DecodedTooLarge",
    "EgressBackend",
    "EgressRefused",
    "EncodingRefused",
    "Network",
    "Purpose",
    "ReadBudget",
    "Resolver",
    "allowlist_for",
    "build_async_client",
    "build_client",
    "check_host",
    "check_url",
    "deadline",
    "iter_capped",
    "parse_allowlist",
    "read_capped",
    "refusal_reason",
    "resolve",
    "shared",
]
