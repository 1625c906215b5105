"""Routes of the groups API, included from config/urls.py under ``api/``; no trailing slashes.

The prefix is ``api/`` and the routes carry ``groups``: an include under ``api/groups`` would
need routes that begin with a slash, which Django's check flags (urls.W002).
"""

from django.urls import path

from . import search, views, webhooks

urlpatterns = [
    path("groups", views.GroupListCreateApi.as_view(), name="groups"),
    path("groups/starter", views.GroupStarterApi.as_view(), name="group-starter"),
    path("groups/<int:group_id>", views.GroupDetailApi.as_view(), name="group"),
    path("groups/<int:group_id>/restore", views.GroupRestoreApi.as_view(), name="group-restore"),
    path("groups/<int:group_id>/clear", views.GroupClearApi.as_view(), name="group-clear"),
    path("groups/<int:group_id>/archive", views.GroupArchiveApi.as_view(), name="group-archive"),
    path("search", search.SearchApi.as_view(), name="search"),
    path("webhooks", webhooks.WebhookListCreateApi.as_view(), name="webhooks"),
    path("webhooks/<int:endpoint_id>", webhooks.WebhookDetailApi.as_view(), name="webhook"),
    path(
        "webhooks/<int:endpoint_id>/rotate-secret",
        webhooks.WebhookRotateSecretApi.as_view(),
        name="webhook-rotate-secret",
    ),
    path("webhooks/<int:endpoint_id>/test", webhooks.WebhookTestApi.as_view(), name="webhook-test"),
    path(
        "webhooks/<int:endpoint_id>/deliveries",
        webhooks.WebhookDeliveryListApi.as_view(),
        name="webhook-deliveries",
    ),
]
