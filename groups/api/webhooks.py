"""Webhook endpoints: an owner's own (add, read, change, rotate the secret, send a test, remove)
and their recent deliveries with every attempt. validate → service → serialize; another
owner's endpoint is a 404. The signing secret is in the answer of an add or a rotate alone."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from garden.api.errors import REFUSED, ErrorOutput
from garden.errors import MAX_ID, not_found
from groups import selectors
from groups.models import WebhookDelivery, WebhookEndpoint
from groups.services.webhooks import (
    EVENTS,
    EndpointWithSecret,
    webhook_endpoint_create,
    webhook_endpoint_delete,
    webhook_endpoint_rotate_secret,
    webhook_endpoint_test,
    webhook_endpoint_update,
)

TAGS = ["webhooks"]


class WebhookEndpointOutput(serializers.Serializer):
    id = serializers.IntegerField(source="pk")
    url = serializers.CharField()
    description = serializers.CharField()
    group = serializers.IntegerField(
        source="group_id", allow_null=True, help_text="The group it hears, or null: all of yours."
    )
    named_only = serializers.BooleanField(
        help_text="It hears only the requests whose message names it (``webhook``)."
    )
    events = serializers.ListField(child=serializers.ChoiceField(choices=EVENTS))
    enabled = serializers.BooleanField()
    disabled_reason = serializers.CharField(
        help_text="Why it was disabled (by you, a 410 Gone, or deliveries that kept failing)."
    )
    disabled_at = serializers.DateTimeField(allow_null=True)
    consecutive_failures = serializers.IntegerField(
        help_text="Deliveries in a row that gave up; one that arrives sets it back to 0."
    )
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class WebhookEndpointCreatedOutput(WebhookEndpointOutput):
    secret = serializers.CharField(
        help_text="The signing secret (whsec_…): shown this once, never again."
    )


class WebhookEndpointInput(serializers.Serializer):
    url = serializers.CharField(max_length=2000, trim_whitespace=True)
    events = serializers.ListField(
        child=serializers.ChoiceField(choices=EVENTS), min_length=1, max_length=len(EVENTS)
    )
    group = serializers.IntegerField(
        required=False, allow_null=True, default=None, min_value=1, max_value=MAX_ID
    )
    named_only = serializers.BooleanField(required=False, default=False)
    description = serializers.CharField(
        max_length=200, required=False, allow_blank=True, default=""
    )


class WebhookEndpointChangeInput(serializers.Serializer):
    """Every part is optional; what is left out stays. ``enabled: true`` re-enables a disabled
    endpoint and clears its failures."""

    url = serializers.CharField(max_length=2000, trim_whitespace=True, required=False)
    events = serializers.ListField(
        child=serializers.ChoiceField(choices=EVENTS),
        min_length=1,
        max_length=len(EVENTS),
        required=False,
    )
    group = serializers.IntegerField(required=False, allow_null=True, min_value=1, max_value=MAX_ID)
    named_only = serializers.BooleanField(required=False)
    description = serializers.CharField(max_length=200, required=False, allow_blank=True)
    enabled = serializers.BooleanField(required=False)


class WebhookAttemptOutput(serializers.Serializer):
    number = serializers.IntegerField()
    at = serializers.DateTimeField()
    status = serializers.IntegerField(allow_null=True, help_text="The HTTP status, if any.")
    error = serializers.CharField(help_text="Why it did not arrive, or empty.")
    duration_ms = serializers.IntegerField()


class WebhookDeliveryOutput(serializers.Serializer):
    id = serializers.IntegerField(source="pk")
    event_id = serializers.CharField(help_text="The webhook-id header of every attempt.")
    event_type = serializers.CharField()
    request = serializers.IntegerField(source="request_id", allow_null=True)
    state = serializers.ChoiceField(choices=WebhookDelivery.State.values)
    attempts = serializers.IntegerField()
    next_attempt_at = serializers.DateTimeField(allow_null=True)
    last_status = serializers.IntegerField(allow_null=True)
    last_error = serializers.CharField()
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    payload = serializers.JSONField(help_text="The body sent ({type, timestamp, data}).")
    attempt_log = WebhookAttemptOutput(many=True)


def webhook_endpoint_payload(endpoint: WebhookEndpoint) -> dict[str, Any]:
    return WebhookEndpointOutput(endpoint).data


def _with_secret(created: EndpointWithSecret) -> dict[str, Any]:
    return {**webhook_endpoint_payload(created.endpoint), "secret": created.secret}


def _owned(request: Request, endpoint_id: int) -> WebhookEndpoint:
    endpoint = selectors.webhook_endpoint_get(owner=request.user, endpoint_id=endpoint_id)
    if endpoint is None:
        raise not_found("webhook endpoint")
    return endpoint


class WebhookListCreateApi(APIView):
    @extend_schema(tags=TAGS, responses={200: WebhookEndpointOutput(many=True), **REFUSED})
    def get(self, request: Request) -> Response:
        endpoints = selectors.webhook_endpoint_list(owner=request.user)
        return Response([webhook_endpoint_payload(e) for e in endpoints])

    @extend_schema(
        tags=TAGS,
        request=WebhookEndpointInput,
        responses={201: WebhookEndpointCreatedOutput, 409: ErrorOutput, **REFUSED},
        description="Add an endpoint for some of request.completed, request.stopped, "
        "request.failed and approval.pending, of one group or all of yours. A URL the egress "
        "policy refuses (EGRESS_REFUSED: loopback, private, link-local or metadata unless the "
        "operator allows it), a group that is not yours (GROUP_NOT_FOUND), one past the site's "
        "limit (WEBHOOK_LIMIT, 409), or a site that cannot store secrets "
        "(ENCRYPTION_UNAVAILABLE) stores nothing. The answer carries the signing "
        "secret, the one time it is shown.",
    )
    def post(self, request: Request) -> Response:
        data = WebhookEndpointInput(data=request.data)
        data.is_valid(raise_exception=True)
        created = webhook_endpoint_create(owner=request.user, **data.validated_data)
        return Response(_with_secret(created), status=status.HTTP_201_CREATED)


class WebhookDetailApi(APIView):
    @extend_schema(tags=TAGS, responses={200: WebhookEndpointOutput, **REFUSED})
    def get(self, request: Request, endpoint_id: int) -> Response:
        return Response(webhook_endpoint_payload(_owned(request, endpoint_id)))

    @extend_schema(
        tags=TAGS,
        request=WebhookEndpointChangeInput,
        responses={200: WebhookEndpointOutput, **REFUSED},
        description="Change the URL, events, group, named_only, description or enabled; "
        "enabling a disabled endpoint clears its reason and its failures.",
    )
    def patch(self, request: Request, endpoint_id: int) -> Response:
        endpoint = _owned(request, endpoint_id)
        data = WebhookEndpointChangeInput(data=request.data)
        data.is_valid(raise_exception=True)
        changed = webhook_endpoint_update(endpoint=endpoint, **data.validated_data)
        return Response(webhook_endpoint_payload(changed))

    @extend_schema(
        tags=TAGS,
        request=None,
        responses={204: None, **REFUSED},
        description="Remove the endpoint and its deliveries. With an access token: the "
        "manage scope (TOKEN_SCOPE, 403, otherwise).",
    )
    def delete(self, request: Request, endpoint_id: int) -> Response:
        webhook_endpoint_delete(endpoint=_owned(request, endpoint_id))
        return Response(status=status.HTTP_204_NO_CONTENT)


class WebhookRotateSecretApi(APIView):
    # What cannot be taken back (the old secret stops at once): the manage scope.
    token_scopes = {"POST": "manage"}

    @extend_schema(
        tags=TAGS,
        request=None,
        responses={200: WebhookEndpointCreatedOutput, **REFUSED},
        description="A new signing secret, shown this once; the old one stops at once. With "
        "an access token: the manage scope (TOKEN_SCOPE, 403, otherwise).",
    )
    def post(self, request: Request, endpoint_id: int) -> Response:
        rotated = webhook_endpoint_rotate_secret(endpoint=_owned(request, endpoint_id))
        return Response(_with_secret(rotated))


class WebhookTestApi(APIView):
    throttle_scopes = {"POST": "messages"}

    @extend_schema(
        tags=TAGS,
        request=None,
        responses={202: WebhookDeliveryOutput, 409: ErrorOutput, **REFUSED},
        description="Send a webhook.test event to the endpoint, like any delivery (signed, "
        "retried, logged). A disabled endpoint is refused (WEBHOOK_DISABLED, 409).",
    )
    def post(self, request: Request, endpoint_id: int) -> Response:
        delivery = webhook_endpoint_test(endpoint=_owned(request, endpoint_id))
        return Response(WebhookDeliveryOutput(delivery).data, status=status.HTTP_202_ACCEPTED)


class WebhookDeliveryListApi(APIView):
    @extend_schema(
        tags=TAGS,
        responses={200: WebhookDeliveryOutput(many=True), **REFUSED},
        description="The endpoint's latest 50 deliveries, newest first, each with its attempts "
        "(kept GARDEN_WEBHOOK_KEEP_DAYS days).",
    )
    def get(self, request: Request, endpoint_id: int) -> Response:
        endpoint = _owned(request, endpoint_id)
        deliveries = selectors.webhook_delivery_list(endpoint=endpoint)
        return Response(WebhookDeliveryOutput(deliveries, many=True).data)
