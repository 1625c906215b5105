"""Routes of the rooms — a group's and a 1:1 conversation's (messages, requests, stop) — and
of approvals, under ``api/``."""

from django.urls import path

from . import conversations, exports
from . import requests as views

urlpatterns = [
    path("groups/<int:group_id>/messages", views.GroupMessagesApi.as_view(), name="group-messages"),
    path(
        "groups/<int:group_id>/requests/<int:request_id>",
        views.GroupRequestDetailApi.as_view(),
        name="group-request",
    ),
    path(
        "groups/<int:group_id>/requests/<int:request_id>/costs",
        views.GroupRequestCostsApi.as_view(),
        name="group-request-costs",
    ),
    path(
        "groups/<int:group_id>/requests/<int:request_id>/cancel",
        views.GroupRequestCancelApi.as_view(),
        name="group-request-cancel",
    ),
    path("groups/<int:group_id>/stop", views.GroupStopApi.as_view(), name="group-stop"),
    path("groups/<int:group_id>/export", exports.GroupExportApi.as_view(), name="group-export"),
    path("groups/<int:group_id>/memory", views.GroupMemoryApi.as_view(), name="group-memory"),
    path(
        "groups/<int:group_id>/memory/import",
        views.GroupMemoryImportApi.as_view(),
        name="group-memory-import",
    ),
    path(
        "conversations/<int:conversation_id>/messages",
        conversations.ConversationMessagesApi.as_view(),
        name="conversation-messages",
    ),
    path(
        "conversations/<int:conversation_id>/requests/<int:request_id>",
        conversations.ConversationRequestDetailApi.as_view(),
        name="conversation-request",
    ),
    path(
        "conversations/<int:conversation_id>/requests/<int:request_id>/costs",
        conversations.ConversationRequestCostsApi.as_view(),
        name="conversation-request-costs",
    ),
    path(
        "conversations/<int:conversation_id>/requests/<int:request_id>/cancel",
        conversations.ConversationRequestCancelApi.as_view(),
        name="conversation-request-cancel",
    ),
    path(
        "conversations/<int:conversation_id>/stop",
        conversations.ConversationStopApi.as_view(),
        name="conversation-stop",
    ),
    path(
        "conversations/<int:conversation_id>/export",
        exports.ConversationExportApi.as_view(),
        name="conversation-export",
    ),
    path("approvals", views.ApprovalListApi.as_view(), name="approvals"),
    path(
        "approvals/<int:approval_id>/decide",
        views.ApprovalDecideApi.as_view(),
        name="approval-decide",
    ),
]
