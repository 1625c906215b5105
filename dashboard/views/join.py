"""The page an invitation's link opens: who invites you where, as what; a signed-in person
joins with one press, a new person invited by email makes their account there and joins.
Every refusal (a link used, withdrawn, expired, not this site's, or for someone else) is
shown by name and changes nothing."""

from __future__ import annotations

from django.contrib.auth import login
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_protect

from dashboard.views.context import page_context
from garden.errors import ServiceError
from garden.services.workspaces import invitation_accept, invitation_peek, invitation_sign_up

MODEL_BACKEND = "django.contrib.auth.backends.ModelBackend"


@csrf_protect
@never_cache
def join(request: HttpRequest, secret: str) -> HttpResponse:
    def page(status: int = 200, **extra) -> HttpResponse:
        context = page_context(request, title="Join a workspace", **extra)
        return TemplateResponse(request, "dashboard/join.html", context, status=status)

    try:
        invitation = invitation_peek(secret=secret)
    except ServiceError as refused:
        return page(refused.status, refused=refused)
    if request.method != "POST":
        return page(invitation=invitation)

    signed_in = request.user.is_authenticated
    try:
        if signed_in:
            membership = invitation_accept(secret=secret, user=request.user)
        else:
            if request.POST.get("password") != request.POST.get("password2"):
                raise ServiceError(
                    "PASSWORDS_DIFFER", "The two passwords differ.", field="password2"
                )
            membership = invitation_sign_up(
                secret=secret,
                username=request.POST.get("username", ""),
                password=request.POST.get("password", ""),
            )
            login(request, membership.user, backend=MODEL_BACKEND)
    except ServiceError as refused:
        return page(refused.status, invitation=invitation, refused=refused, data=request.POST)
    return HttpResponseRedirect(reverse("dashboard:index") + f"?joined={membership.workspace_id}")
