"""The group's memory scope, and the one way private memory enters a room: an import the
owner makes explicitly."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from garden import events
from garden.models import Agent, MemoryNote, Message
from garden.services.conversations import message_append, text_block
from groups.models import Group
from groups.services.requests import RequestError, group_conversation_open

MEMORY_SENTENCE = "What is in the room is seen by the room."


def memory_import_private_note(*, owner: AbstractBaseUser, group: Group, note_id: int) -> MemoryNote:
    """Copy one of the owner's agents' private notes into the group's memory and say so in the
    room, under the owner's name: the owner authorised it, so the room sees it."""
    note = MemoryNote.objects.filter(pk=note_id, owner=owner, scope__startswith="private:").first()
    if note is None:
        raise RequestError("NOTE_NOT_FOUND", "No such private note.", field="note", status=400)
    agent = Agent.objects.filter(owner=owner, pk=int(note.scope.split(":", 1)[1])).first()
    source = f"@{agent.handle}'s" if agent else "a"
    with transaction.atomic():
        locked = Group.objects.select_for_update().filter(pk=group.pk, deleted_at__isnull=True).first()
        if locked is None:
            raise RequestError("NOT_FOUND", "No such group.", field="group", status=404)
        copy = MemoryNote.objects.create(owner=owner, scope=locked.memory_scope, kind=note.kind,
                                         text=note.text)
        conversation = group_conversation_open(group=locked)
        message_append(conversation_id=conversation.pk, speaker_kind=Message.SpeakerKind.OWNER,
                       content=[text_block(f"Imported from {source} private memory: {note.text}")],
                       channel=events.group_channel(locked.pk))
    return copy


def group_memory(*, group: Group):
    return MemoryNote.objects.filter(owner_id=group.owner_id, scope=group.memory_scope).order_by("id")
