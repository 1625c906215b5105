"""Routes of the missions API, included from config/urls.py under ``api/``; no trailing slashes.

The routes carry ``missions`` themselves, as the groups routes do: an include under
``api/missions`` would need routes beginning with a slash, which Django's check flags (urls.W002).
"""

from django.urls import path

from . import views

urlpatterns = [
    path("missions", views.MissionListCreateApi.as_view(), name="missions"),
    path("missions/<int:mission_id>", views.MissionDetailApi.as_view(), name="mission"),
    path("missions/<int:mission_id>/run", views.MissionRunNowApi.as_view(), name="mission-run"),
    path("missions/<int:mission_id>/runs", views.MissionRunListApi.as_view(), name="mission-runs"),
]
