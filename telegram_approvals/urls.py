from django.urls import path

from telegram_approvals import views

app_name = "telegram"

urlpatterns = [
    path("webhook", views.webhook, name="webhook"),
]
