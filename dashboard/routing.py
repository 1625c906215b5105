"""The dashboard's websocket routes, included by config/routing.py."""

from django.urls import path

from dashboard.consumers import (
    ConversationConsumer,
    GroupConsumer,
    OperatorConsumer,
    RosterConsumer,
)

websocket_urlpatterns = [
    path("ws/groups/<int:group_id>/", GroupConsumer.as_asgi()),
    path("ws/conversations/<int:conversation_id>/", ConversationConsumer.as_asgi()),
    path("ws/roster/", RosterConsumer.as_asgi()),
    path("ws/operator/", OperatorConsumer.as_asgi()),
]
