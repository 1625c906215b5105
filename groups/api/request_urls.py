"""Routes of the room (messages, requests, stop) and of approvals, under ``api/``."""

from django.urls import path

from . import requests as views

urlpatterns = [
    path("groups/<int:group_id>/messages", views.GroupMessagesApi.as_view(), name="group-messages"),
    path(
        "groups/<int:group_id>/requests/<int:request_id>",
        views.GroupRequestDetailApi.as_view(),
        name="group-request",
    ),
    path(
        "groups/<int:group_id>/requests/<int:request_id>/cancel",
        views.GroupRequestCancelApi.as_view(),
        name="group-request-cancel",
    ),
    path("groups/<int:group_id>/stop", views.GroupStopApi.as_view(), name="group-stop"),
    path("groups/<int:group_id>/memory", views.GroupMemoryApi.as_view(), name="group-memory"),
    path(
        "groups/<int:group_id>/memory/import",
        views.GroupMemoryImportApi.as_view(),
        name="group-memory-import",
    ),
    path("approvals", views.ApprovalListApi.as_view(), name="approvals"),
    path(
        "approvals/<int:approval_id>/decide",
        views.ApprovalDecideApi.as_view(),
        name="approval-decide",
    ),
]
