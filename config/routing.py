"""Websocket routes."""

from dashboard.routing import websocket_urlpatterns as dashboard_routes

websocket_urlpatterns: list = [*dashboard_routes]
