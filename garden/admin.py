"""Django admin for garden's core rows, for staff."""

from django.contrib import admin

from garden.models import Agent, Artifact, Conversation, Message, ModelAccount


@admin.register(ModelAccount)
class ModelAccountAdmin(admin.ModelAdmin):
    list_display = ["name", "owner", "provider", "model", "base_url", "secret_ref"]
    list_filter = ["provider"]
    search_fields = ["name", "model", "owner__username"]


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
    readonly_fields = ["conversation", "seq", "speaker_kind", "speaker_agent", "kind", "content",
                       "request", "in_reply_to", "addressed_agent", "reply_to_call_id", "step",
                       "created_at"]

    def has_add_permission(self, request):
        return False


@admin.register(Artifact)
class ArtifactAdmin(admin.ModelAdmin):
    list_display = ["title", "kind", "owner", "agent", "conversation", "size", "created_at"]
    list_filter = ["kind"]
    search_fields = ["title"]
    raw_id_fields = ["agent", "conversation"]
