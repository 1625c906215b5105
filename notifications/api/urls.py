from django.urls import path

from notifications.api import views

urlpatterns = [
    path("notifications", views.NotificationSettingsApi.as_view(), name="notifications"),
]
