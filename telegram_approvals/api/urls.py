from django.urls import path

from telegram_approvals.api import views

urlpatterns = [
    path("telegram/link", views.TelegramLinkApi.as_view(), name="telegram-link"),
    path("telegram/link-code", views.TelegramLinkCodeApi.as_view(), name="telegram-link-code"),
]
