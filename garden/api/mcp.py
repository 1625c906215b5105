"""MCP servers: an owner's own (add, read, change, refresh, remove) and the site's, read-only.
validate → service → serialize; another owner's server is 404."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from garden import selectors
from garden.api.auth import has_scope
from garden.api.serializers import McpServerChangeInput, McpServerInput, McpServerOutput
from garden.errors import not_found
from garden.models import McpServer
from garden.services.mcp import (
    mcp_server_create,
    mcp_server_delete,
    mcp_server_refresh,
    mcp_server_update,
)
from garden.tools.mcp import servers_offered


def _owned(request: Request, server_id: int) -> McpServer:
    server = selectors.mcp_server_list(owner=request.user).filter(pk=server_id).first()
    if server is None:
        raise not_found("MCP server")
    return server


def _payload(request: Request, server: McpServer, **extra) -> dict:
    shown = next(s for s in servers_offered(owner=request.user) if s["id"] == server.pk)
    return McpServerOutput({**shown, **extra}).data


class McpServerListCreateApi(APIView):
    # Adding one lists its tools over the network, like a model account's test.
    throttle_scopes = {"POST": "messages"}

    @extend_schema(
        responses=McpServerOutput(many=True),
        description="Your MCP servers and the ones this site offers you, each with its tools.",
    )
    def get(self, request: Request) -> Response:
        return Response(McpServerOutput(servers_offered(owner=request.user), many=True).data)

    @extend_schema(
        request=McpServerInput,
        responses={201: McpServerOutput},
        description="Add a remote MCP server (Streamable HTTP). Its tools are listed first: a "
        "URL the egress policy refuses (EGRESS_REFUSED), a server that cannot be reached "
        "(MCP_UNREACHABLE), refuses the credentials (MCP_AUTH_FAILED), does not speak MCP "
        "(MCP_NOT_MCP) or does not answer in time (MCP_TIMEOUT) is refused and nothing is "
        "stored. Headers and the bearer token are stored encrypted and never returned.",
    )
    def post(self, request: Request) -> Response:
        data = McpServerInput(data=request.data)
        data.is_valid(raise_exception=True)
        server = mcp_server_create(owner=request.user, **data.validated_data)
        return Response(_payload(request, server), status=status.HTTP_201_CREATED)


class McpServerDetailApi(APIView):
    throttle_scopes = {"PATCH": "messages"}

    @extend_schema(responses=McpServerOutput)
    def get(self, request: Request, server_id: int) -> Response:
        return Response(_payload(request, _owned(request, server_id)))

    @extend_schema(
        request=McpServerChangeInput,
        responses=McpServerOutput,
        description="Change the URL or the headers; the tools are listed again. A URL on "
        "another origin without new headers drops the stored ones (headers_cleared: true).",
    )
    def patch(self, request: Request, server_id: int) -> Response:
        server = _owned(request, server_id)
        data = McpServerChangeInput(data=request.data)
        data.is_valid(raise_exception=True)
        change = mcp_server_update(
            server=server, **data.validated_data, manage=has_scope(request, "manage")
        )
        return Response(_payload(request, change.server, headers_cleared=change.headers_cleared))

    @extend_schema(
        request=None,
        responses={204: None},
        description="Remove the server; its tools leave every agent that had them.",
    )
    def delete(self, request: Request, server_id: int) -> Response:
        mcp_server_delete(server=_owned(request, server_id))
        return Response(status=status.HTTP_204_NO_CONTENT)


class McpServerRefreshApi(APIView):
    throttle_scopes = {"POST": "messages"}

    @extend_schema(
        request=None,
        responses=McpServerOutput,
        description="List the server's tools again and keep them (the dashboard's Test); a "
        "failure is refused by name and keeps the tools listed before.",
    )
    def post(self, request: Request, server_id: int) -> Response:
        server = mcp_server_refresh(server=_owned(request, server_id))
        return Response(_payload(request, server))
