"""Django admin for garden's core rows, for staff."""

from datetime import timedelta

from django import forms
from django.conf import settings
from django.contrib import admin
from django.contrib.auth.models import Group as AuthGroup
from django.db.models import Count
from django.utils import timezone

from garden.errors import ServiceError
from garden.models import (
    AccessToken,
    Agent,
    Artifact,
    BeatLease,
    Conversation,
    McpServer,
    Message,
    ModelAccount,
    PageVisit,
    TokenBudget,
    WorkerBeat,
    Workspace,
    WorkspaceInvitation,
    WorkspaceMember,
)
from garden.selectors import account_key_status
from garden.services.accounts import model_account_check
from garden.services.mcp import mcp_server_delete

# The admin speaks of garden; Django's permission groups (unused here) would sit beside
# garden's groups under the same name.
admin.site.site_header = "garden administration"
admin.site.site_title = "garden admin"
admin.site.index_title = "garden"
if admin.site.is_registered(AuthGroup):
    admin.site.unregister(AuthGroup)


class ModelAccountForm(forms.ModelForm):
    """The account under the same checks as the API; the key is write-only: typed in, never
    shown again (the field is always empty on the page)."""

    api_key = forms.CharField(
        required=False,
        strip=True,
        max_length=4096,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="Paste a key to store it encrypted; leave empty to keep the current one.",
    )
    clear_api_key = forms.BooleanField(required=False, help_text="Forget the stored key.")

    class Meta:
        model = ModelAccount
        fields = [
            "owner",
            "name",
            "provider",
            "model",
            "base_url",
            "credential",
            "timeout_seconds",
            "options",
        ]

    def clean(self):
        data = super().clean()
        if self.errors:
            return data
        try:
            self.checked = model_account_check(
                owner=data["owner"],
                provider=data["provider"],
                model=data.get("model", ""),
                base_url=data.get("base_url", ""),
                credential=data.get("credential", ""),
                api_key=data.get("api_key") or None,
                clear_api_key=data.get("clear_api_key", False),
                options=data.get("options") or {},
                timeout_seconds=data["timeout_seconds"],
                staff=True,
                account=self.instance if self.instance.pk else None,
            )
        except ServiceError as exc:
            self.add_error(exc.field if exc.field in self.fields else None, exc.message)
        return data

    def save(self, commit=True):
        account = super().save(commit=False)
        account.api_key_encrypted = self.checked.api_key_encrypted
        account.legacy_secret_ref = self.checked.legacy_secret_ref
        if commit:
            account.save()
        return account


@admin.register(ModelAccount)
class ModelAccountAdmin(admin.ModelAdmin):
    form = ModelAccountForm
    list_display = ["name", "owner", "provider", "model", "base_url", "key"]
    list_filter = ["provider"]
    search_fields = ["name", "model", "owner__username"]
    readonly_fields = ["key"]

    @admin.display(description="Key")
    def key(self, account: ModelAccount) -> str:
        if account.pk is None:
            return "—"
        status = account_key_status(account)
        return status["label"] if status["usable"] else f"{status['label']}: {status['problem']}"


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):
    list_display = ["name", "handle", "owner", "model_account", "builtin", "removed_at"]
    list_filter = ["builtin", ("removed_at", admin.EmptyFieldListFilter)]
    search_fields = ["name", "handle", "owner__username"]
    filter_horizontal = ["delegation_allowlist"]
    raw_id_fields = ["model_account"]


class MessageInline(admin.TabularInline):
    model = Message
    fields = ["seq", "speaker_kind", "speaker_agent", "kind", "content", "created_at"]
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Conversation)
class ConversationAdmin(admin.ModelAdmin):
    list_display = ["__str__", "owner", "agent", "group", "status", "last_seq", "created_at"]
    list_filter = ["status"]
    search_fields = ["title", "owner__username"]
    raw_id_fields = ["agent", "group"]
    readonly_fields = ["last_seq", "created_at", "closed_at"]
    inlines = [MessageInline]


@admin.register(Message)
class MessageAdmin(admin.ModelAdmin):
    list_display = ["conversation", "seq", "speaker_kind", "speaker_agent", "kind", "created_at"]
    list_filter = ["speaker_kind", "kind"]
    # Speakers are trusted metadata written by server code: shown, never edited.
    readonly_fields = [
        "conversation",
        "seq",
        "speaker_kind",
        "speaker_agent",
        "kind",
        "content",
        "request",
        "in_reply_to",
        "addressed_agent",
        "reply_to_call_id",
        "step",
        "created_at",
    ]

    def has_add_permission(self, request):
        return False


@admin.register(Artifact)
class ArtifactAdmin(admin.ModelAdmin):
    list_display = ["title", "kind", "owner", "agent", "conversation", "size", "created_at"]
    list_filter = ["kind"]
    search_fields = ["title"]
    raw_id_fields = ["agent", "conversation"]


@admin.register(PageVisit)
class PageVisitAdmin(admin.ModelAdmin):
    """The pages agents fetched, as their owners' Canvas shows them: staff read and remove,
    nothing is added or changed here."""

    list_display = ["url", "status", "error", "owner", "agent", "conversation", "created_at"]
    list_filter = ["status"]
    search_fields = ["url", "title"]
    raw_id_fields = ["agent", "conversation"]
    fields = ["owner", "agent", "conversation", "url", "status", "error", "title", "excerpt"]
    readonly_fields = fields

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(McpServer)
class McpServerAdmin(admin.ModelAdmin):
    """Owners' MCP servers, for staff to see and remove. They are added and changed by their
    owners (the API lists a server's tools before storing it); headers are never shown."""

    list_display = ["name", "owner", "url", "tool_count", "header_names", "refreshed_at"]
    search_fields = ["name", "url", "owner__username"]
    fields = ["owner", "name", "url", "header_names", "tools", "refreshed_at", "created_at"]
    readonly_fields = fields

    @admin.display(description="tools")
    def tool_count(self, server: McpServer) -> int:
        return len(server.tools or [])

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def delete_model(self, request, obj):
        mcp_server_delete(server=obj)

    def delete_queryset(self, request, queryset):
        for server in queryset:
            mcp_server_delete(server=server)


@admin.register(WorkerBeat)
class WorkerBeatAdmin(admin.ModelAdmin):
    """The workers that are, or lately were, alive, with their last beat: written by the
    workers themselves, never edited here. A stale row is a worker that died; deleting it
    only tidies the list."""

    list_display = ["hostname", "alive", "embedded", "concurrency", "pid", "started_at", "beat_at"]
    list_filter = ["embedded"]
    readonly_fields = ["hostname", "pid", "concurrency", "embedded", "started_at", "beat_at"]

    @admin.display(boolean=True, description="alive")
    def alive(self, beat: WorkerBeat) -> bool:
        return beat.beat_at >= timezone.now() - timedelta(
            seconds=settings.GARDEN_WORKER_STALE_SECONDS
        )

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(BeatLease)
class BeatLeaseAdmin(admin.ModelAdmin):
    """Which Celery beat sends the schedule, until when, and when it last renewed: written by
    the beats themselves (garden/beat.py), never edited here."""

    list_display = ["name", "holder", "expires_at", "ticked_at"]
    readonly_fields = ["name", "holder", "expires_at", "ticked_at"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(AccessToken)
class AccessTokenAdmin(admin.ModelAdmin):
    """People's access tokens, by name and first characters (the tokens themselves are never
    kept). Staff may revoke one that leaked; owners make and revoke theirs in the dashboard."""

    list_display = [
        "name",
        "prefix",
        "owner",
        "created_at",
        "last_used_at",
        "expires_at",
        "revoked_at",
    ]
    list_filter = [("revoked_at", admin.EmptyFieldListFilter)]
    search_fields = ["name", "prefix", "owner__username"]
    readonly_fields = list_display
    fields = list_display
    actions = ["revoke"]

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request, queryset) -> None:
        revoked = queryset.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())
        self.message_user(request, f"Revoked {revoked} token(s).")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(TokenBudget)
class TokenBudgetAdmin(admin.ModelAdmin):
    """An owner's token budgets on each of the operator's credentials, where they differ from
    the site's (GARDEN_TOKEN_BUDGET_PER_MINUTE / _PER_DAY): empty keeps the site's, 0 is
    unlimited. The next call checks them (garden/budgets.py)."""

    list_display = ["owner", "per_minute", "per_day", "updated_at"]
    search_fields = ["owner__username"]
    raw_id_fields = ["owner"]
    fields = ["owner", "per_minute", "per_day"]


class WorkspaceMemberFormSet(forms.BaseInlineFormSet):
    def clean(self) -> None:
        super().clean()
        kept = [
            form.cleaned_data
            for form in self.forms
            if form.cleaned_data and not form.cleaned_data.get("DELETE")
        ]
        if not any(data.get("role") == WorkspaceMember.Role.ADMIN for data in kept):
            raise forms.ValidationError(
                "A workspace keeps at least one admin: make another person admin first."
            )


class WorkspaceMemberInline(admin.TabularInline):
    model = WorkspaceMember
    formset = WorkspaceMemberFormSet
    fk_name = "workspace"
    fields = ["user", "role", "approver", "added_by", "added_at"]
    readonly_fields = ["added_by", "added_at"]
    raw_id_fields = ["user"]
    extra = 0
    min_num = 1

    # A personal workspace is its person's alone: its one membership is shown, never changed.
    def _team(self, obj) -> bool:
        return obj is None or obj.kind == Workspace.Kind.TEAM

    def has_add_permission(self, request, obj=None):
        return self._team(obj) and super().has_add_permission(request, obj)

    def has_change_permission(self, request, obj=None):
        return self._team(obj) and super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None):
        return self._team(obj) and super().has_delete_permission(request, obj)


@admin.register(Workspace)
class WorkspaceAdmin(admin.ModelAdmin):
    """Workspaces and their people. Staff make team workspaces here (with at least one admin);
    a person's own workspace is made with them and keeps them alone."""

    list_display = ["name", "kind", "personal_for", "people", "created_at"]
    list_filter = ["kind"]
    search_fields = ["name", "members__user__username"]
    inlines = [WorkspaceMemberInline]

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(people_count=Count("members"))

    @admin.display(description="People", ordering="people_count")
    def people(self, workspace: Workspace) -> int:
        return workspace.people_count

    def get_fields(self, request, obj=None):
        return ["name"] if obj is None else ["name", "kind", "personal_for", "created_at"]

    def get_readonly_fields(self, request, obj=None):
        return [] if obj is None else ["kind", "personal_for", "created_at"]

    def has_delete_permission(self, request, obj=None):
        # A person's own workspace goes with them, not before.
        personal = obj is not None and obj.kind == Workspace.Kind.PERSONAL
        return not personal and super().has_delete_permission(request, obj)

    def save_model(self, request, obj, form, change):
        if not change:
            obj.kind = Workspace.Kind.TEAM
        super().save_model(request, obj, form, change)

    def save_formset(self, request, form, formset, change):
        for membership in formset.save(commit=False):
            if membership.pk is None:
                membership.added_by = request.user
            membership.save()
        for gone in formset.deleted_objects:
            gone.delete()


@admin.register(WorkspaceInvitation)
class WorkspaceInvitationAdmin(admin.ModelAdmin):
    """Invitations admins made, for staff to read and withdraw (the links themselves are never
    kept: only their hash)."""

    list_display = [
        "workspace",
        "email",
        "username",
        "role",
        "invited_by",
        "expires_at",
        "used_at",
        "used_by",
        "revoked_at",
    ]
    list_filter = [
        ("used_at", admin.EmptyFieldListFilter),
        ("revoked_at", admin.EmptyFieldListFilter),
    ]
    search_fields = ["workspace__name", "email", "username"]
    readonly_fields = [*list_display, "approver", "created_at"]
    fields = readonly_fields
    actions = ["withdraw"]

    @admin.action(description="Withdraw the selected invitations")
    def withdraw(self, request, queryset) -> None:
        withdrawn = queryset.filter(used_at__isnull=True, revoked_at__isnull=True).update(
            revoked_at=timezone.now()
        )
        self.message_user(request, f"Withdrew {withdrawn} invitation(s).")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
