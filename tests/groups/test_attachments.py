"""Attachments on an owner's message: a multipart POST stores each file as an artifact of the
open thread in the turn's own transaction, refusals are named and write nothing, and a model
whose adapter carries pictures and PDFs receives them as content parts (a real local server
records what each call was sent); otherwise, and past the room's cap, a one-line reference."""

from __future__ import annotations

import base64
import dataclasses

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import transaction

from garden.attachments import Upload
from garden.models import Artifact, AttachmentData, Message
from garden.providers.types import ArtifactRef, TextBlock
from garden.services.accounts import model_account_create
from garden.tools import ToolContext, run_tool
from groups.domain.bounding import bound
from groups.domain.projection import AgentView, GroupView, Turn, project
from groups.domain.rendering import render_ref
from groups.models import Approval, GroupRequest
from groups.services.requests import group_conversation_open, request_create
from tests.groups.helpers import (
    CSV_BYTES,
    anthropic_reply,
    drive,
    on_server,
    pdf_bytes,
    png_bytes,
)
from tests.support.providers import openai_reply

pytestmark = pytest.mark.django_db

PNG = png_bytes()
PDF = pdf_bytes()


@pytest.fixture
def group(group_factory):
    return group_factory(concierge_rules=[], members={"ledger": [], "advisor": []})


def counts():
    return (
        Message.objects.count(),
        GroupRequest.objects.count(),
        Approval.objects.count(),
        Artifact.objects.count(),
        AttachmentData.objects.count(),
    )


def upload(name: str, data: bytes, content_type: str = "application/octet-stream"):
    return SimpleUploadedFile(name, data, content_type=content_type)


def post_form(api, group_id: int, data: dict, **extra):
    return api.client.post(
        f"/api/groups/{group_id}/messages",
        data,
        format="multipart",
        HTTP_X_CSRFTOKEN=api.token,
        **extra,
    )


def refusal(response) -> tuple[int, str]:
    return response.status_code, response.json()["code"]


# --- the API ---------------------------------------------------------------------------------


def test_a_message_with_a_picture_a_pdf_and_a_csv_stores_three_artifacts(api, group):
    response = post_form(
        api,
        group.pk,
        {
            "text": "@ledger what do these say?",
            # The client's content types and names say nothing the server relies on.
            "files": [
                upload("chart.png", PNG, "text/plain"),
                upload("lease.pdf", PDF),
                upload("../../rent.csv", CSV_BYTES, "image/png"),
            ],
        },
    )
    assert response.status_code == 202, response.content
    message = response.json()["message"]
    artifacts = list(Artifact.objects.order_by("id"))
    assert [(a.kind, a.mime_type, a.title, a.size) for a in artifacts] == [
        ("image", "image/png", "chart.png", len(PNG)),
        ("document", "application/pdf", "lease.pdf", len(PDF)),
        ("document", "text/csv", "rent.csv", len(CSV_BYTES)),
    ]
    assert message["content"] == [
        {"type": "text", "text": "@ledger what do these say?"},
        *[
            {"type": "artifact_ref", "artifact_id": str(a.pk), "kind": a.kind, "title": a.title}
            for a in artifacts
        ],
    ]
    stored = Message.objects.get(pk=message["id"])
    assert stored.content == message["content"]
    thread = group_conversation_open(group=group)
    assert {a.conversation_id for a in artifacts} == {thread.pk}
    assert {a.owner_id for a in artifacts} == {group.owner_id}
    assert all(a.agent_id is None for a in artifacts)
    assert [bytes(d.data) for d in AttachmentData.objects.order_by("artifact_id")] == [
        PNG,
        PDF,
        CSV_BYTES,
    ]
    # The request routes by the text as before.
    assert [c["source"] for c in response.json()["request"]["queue"]] == ["mention"]
    # A text document keeps its text for file.read; a picture is not text.
    ctx = ToolContext(
        owner_id=group.owner_id,
        agent_id=group.coordinator_id,
        conversation_id=thread.pk,
        group_id=group.pk,
        output_chars=12_000,
    )
    read = run_tool(ctx, "file.read", {"artifact": artifacts[2].pk})
    assert not read.is_error and "January,1400" in read.content
    assert run_tool(ctx, "file.read", {"artifact": artifacts[0].pk}).code == "NOT_TEXT"


def test_files_alone_are_a_message_and_nothing_at_all_is_empty(api, group):
    response = post_form(api, group.pk, {"files": [upload("chart.png", PNG)]})
    assert response.status_code == 202, response.content
    assert [b["type"] for b in response.json()["message"]["content"]] == ["artifact_ref"]
    before = counts()
    assert refusal(post_form(api, group.pk, {"text": "  "})) == (400, "EMPTY_CONTENT")
    assert counts() == before


def test_the_json_form_still_works_and_carries_text_only(api, group):
    response = api.post(f"/api/groups/{group.pk}/messages", {"text": "Plan the week."})
    assert response.status_code == 202
    assert response.json()["message"]["content"] == [{"type": "text", "text": "Plan the week."}]
    assert Artifact.objects.count() == 0
    # A multipart form without files is a message like the JSON one.
    response = post_form(api, group.pk, {"text": "And the next."})
    assert response.status_code == 202
    assert response.json()["message"]["content"] == [{"type": "text", "text": "And the next."}]


@pytest.mark.parametrize(
    ("files", "code"),
    [
        ([("a.png", PNG)] * 5, "TOO_MANY_ATTACHMENTS"),
        ([("big.png", PNG + b"\x00" * 2_000)], "ATTACHMENT_TOO_LARGE"),
        ([("tool.exe", b"MZ\x90\x00\x03" + b"\x00" * 60)], "ATTACHMENT_TYPE_NOT_ALLOWED"),
        # Named and typed as a picture, but the bytes are text: neither rescues the other.
        ([("photo.png", b"just some words")], "ATTACHMENT_TYPE_NOT_ALLOWED"),
        (
            [("drawing.svg", b"<svg xmlns='http://www.w3.org/2000/svg'/>")],
            "ATTACHMENT_TYPE_NOT_ALLOWED",
        ),
        ([("notes.txt", b"\xff\xfe\xfa not utf-8")], "ATTACHMENT_TYPE_NOT_ALLOWED"),
        ([("notes.txt", b"a\x00b")], "ATTACHMENT_TYPE_NOT_ALLOWED"),
        ([("data.json", b"{not json")], "ATTACHMENT_TYPE_NOT_ALLOWED"),
        ([("empty.csv", b"")], "ATTACHMENT_EMPTY"),
        # One bad file among good ones: the whole message is refused.
        ([("a.png", PNG), ("tool.exe", b"MZ\x90\x00")], "ATTACHMENT_TYPE_NOT_ALLOWED"),
    ],
)
def test_each_refusal_is_named_and_writes_nothing(api, group, settings, files, code):
    settings.GARDEN_ATTACHMENT_MAX_BYTES = 1_000
    before = counts()
    response = post_form(
        api,
        group.pk,
        {"text": "look", "files": [upload(n, d, "image/png") for n, d in files]},
    )
    assert refusal(response) == (400, code), response.content
    assert response.json()["errors"][0]["field"] == "files"
    assert counts() == before


def test_a_body_larger_than_every_file_together_is_refused_unread(api, group, settings):
    settings.GARDEN_ATTACHMENT_MAX_BYTES = 1_000
    settings.GARDEN_API_MAX_BODY_BYTES = 1_000
    before = counts()
    # Over (4 files x 1,000) + 1,000 bytes: refused by its length before any part is parsed.
    response = post_form(api, group.pk, {"text": "x", "files": [upload("a.png", PNG * 200)]})
    assert refusal(response) == (413, "PAYLOAD_TOO_LARGE")
    assert counts() == before


def test_the_service_holds_the_same_limits(group, settings):
    settings.GARDEN_MAX_ATTACHMENTS = 1
    with pytest.raises(Exception) as refused:
        request_create(
            group=group, text="x", attachments=[Upload("a.png", PNG), Upload("b.png", PNG)]
        )
    assert refused.value.code == "TOO_MANY_ATTACHMENTS"
    assert Artifact.objects.count() == 0


def test_a_refused_turn_leaves_no_file_behind(api, group):
    before = counts()
    response = post_form(api, group.pk, {"text": "@ghost look", "files": [upload("a.png", PNG)]})
    assert refusal(response) == (400, "UNKNOWN_MEMBER")
    assert counts() == before


def test_bad_form_fields_are_named(api, group):
    before = counts()
    response = post_form(api, group.pk, {"text": "a\x00b", "files": [upload("a.png", PNG)]})
    assert refusal(response) == (400, "INVALID_CHARACTER")
    response = post_form(api, group.pk, {"text": "hi", "files": "not a file"})
    assert response.status_code == 400 and response.json()["errors"][0]["field"].startswith("files")
    response = api.client.post(
        f"/api/groups/{group.pk}/messages",
        b"--x\r\nnot a form",
        content_type="multipart/form-data",  # no boundary: no way to read it
        HTTP_X_CSRFTOKEN=api.token,
    )
    assert refusal(response) == (400, "INVALID_MULTIPART"), response.content
    assert counts() == before


def test_form_fields_beyond_djangos_memory_limit_are_refused(api, group, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 100
    before = counts()
    response = post_form(api, group.pk, {"text": "y" * 200, "files": [upload("a.png", PNG)]})
    assert refusal(response) == (413, "PAYLOAD_TOO_LARGE")
    assert counts() == before


def test_another_owners_group_is_404_and_writes_nothing(client, stranger, group):
    from rest_framework.test import APIClient

    other = APIClient()
    other.force_login(stranger)
    before = counts()
    response = other.post(
        f"/api/groups/{group.pk}/messages",
        {"text": "mine now", "files": [upload("a.png", PNG)]},
        format="multipart",
    )
    assert response.status_code == 404
    assert counts() == before


def test_writes_with_files_need_csrf(api, group):
    before = counts()
    response = api.client.post(
        f"/api/groups/{group.pk}/messages",
        {"text": "hi", "files": [upload("a.png", PNG)]},
        format="multipart",
    )
    assert response.status_code == 403
    assert counts() == before


# --- what a model is sent ------------------------------------------------------------------


def user_messages(body: dict) -> list[dict]:
    return [m for m in body["messages"] if m["role"] == "user"]


def openai_parts(body: dict) -> list[dict]:
    """The content parts of the last user message that carries a list of them."""
    return next(
        m["content"] for m in reversed(user_messages(body)) if isinstance(m["content"], list)
    )


def asked(group, text: str, *, chart: bytes, lease: bytes) -> list[Artifact]:
    """The owner sends chart.png and lease.pdf; the request runs to its end."""
    request = request_create(
        group=group,
        text=text,
        attachments=[Upload("chart.png", chart), Upload("lease.pdf", lease)],
    )
    drive(request, limit=40)
    assert request.state == "completed", request.outcome
    return list(Artifact.objects.order_by("id"))


def test_openai_receives_the_picture_as_an_image_part(group, owner, provider_server):
    on_server(owner, group.coordinator, provider_server)
    provider_server.reply(200, openai_reply("A bar chart of rent."))
    picture, lease = asked(group, "What does the chart show?", chart=PNG, lease=PDF)
    parts = openai_parts(provider_server.requests[0].body)
    assert parts == [
        {
            "type": "text",
            "text": f"What does the chart show?\n[artifact {picture.pk} (image): chart.png]",
        },
        {
            "type": "image_url",
            "image_url": {"url": "data:image/png;base64," + base64.b64encode(PNG).decode()},
        },
        # A PDF is not a part chat-completions servers agree on: it stays a reference.
        {"type": "text", "text": f"[artifact {lease.pk} (document): lease.pdf]"},
    ]


def test_anthropic_receives_an_image_block_and_a_document_block(group, owner, provider_server):
    coordinator = group.coordinator
    coordinator.model_account = model_account_create(
        owner=owner,
        name="claude-http",
        provider="anthropic",
        model="claude-test",
        base_url=provider_server.url,
        timeout_seconds=5,
    )
    coordinator.save(update_fields=["model_account"])
    provider_server.reply(200, anthropic_reply("A chart and a lease."))
    picture, lease = asked(group, "Read these.", chart=PNG, lease=PDF)
    body = provider_server.requests[0].body
    blocks = [b for m in user_messages(body) for b in m["content"]]
    media = [b for b in blocks if b["type"] in ("image", "document")]
    assert media == [
        {
            "type": "image",
            "source": {
                "type": "base64",
                "media_type": "image/png",
                "data": base64.b64encode(PNG).decode(),
            },
        },
        {
            "type": "document",
            "source": {
                "type": "base64",
                "media_type": "application/pdf",
                "data": base64.b64encode(PDF).decode(),
            },
            "title": "lease.pdf",
        },
    ]
    texts = [b["text"] for b in blocks if b["type"] == "text"]
    assert f"[artifact {picture.pk} (image): chart.png]" in texts
    assert f"[artifact {lease.pk} (document): lease.pdf]" in texts
    # Each part follows its own reference line.
    at = blocks.index(media[0])
    assert blocks[at - 1]["text"] == f"[artifact {picture.pk} (image): chart.png]"


def test_an_account_that_says_images_false_gets_the_line_reference(group, owner, provider_server):
    on_server(owner, group.coordinator, provider_server)
    account = group.coordinator.model_account
    account.options = {"images": False}
    account.save(update_fields=["options"])
    provider_server.reply(200, openai_reply("I can only read text."))
    request = request_create(group=group, text="See this.", attachments=[Upload("c.png", PNG)])
    drive(request, limit=40)
    assert request.state == "completed", request.outcome
    picture = Artifact.objects.get()
    contents = [m["content"] for m in user_messages(provider_server.requests[0].body)]
    assert all(isinstance(c, str) for c in contents)
    assert any(f"[artifact {picture.pk} (image): c.png]" in c for c in contents)
    assert "base64" not in str(provider_server.requests[0].body)


def test_only_the_most_recent_pictures_are_carried(group, owner, provider_server, settings):
    settings.GARDEN_MAX_INLINE_ATTACHMENTS = 2
    on_server(owner, group.coordinator, provider_server)
    provider_server.reply(200, openai_reply("Seen."))
    colours = [(255, 0, 0), (0, 255, 0), (0, 0, 255)]
    request = request_create(
        group=group,
        text="Three pictures.",
        attachments=[Upload(f"p{i}.png", png_bytes(rgb=c)) for i, c in enumerate(colours)],
    )
    drive(request, limit=40)
    urls = [
        p["image_url"]["url"]
        for p in openai_parts(provider_server.requests[0].body)
        if p["type"] == "image_url"
    ]
    assert urls == [
        "data:image/png;base64," + base64.b64encode(png_bytes(rgb=c)).decode() for c in colours[1:]
    ]


def test_another_owners_or_groups_picture_is_never_sent(
    group, group_factory, owner, stranger, provider_server
):
    """A turn naming an artifact the group does not hold gets its line, never the bytes."""
    from tests.groups.conftest import make_group

    theirs = make_group(stranger, concierge_rules=[], members={"scout": []}, name="Theirs")
    mine_elsewhere = group_factory(concierge_rules=[], members={"ledger": []}, name="Elsewhere")
    foreign = []
    for other in (theirs, mine_elsewhere):
        other_request = request_create(
            group=other, text="keep", attachments=[Upload("secret.png", png_bytes(rgb=(1, 2, 3)))]
        )
        foreign.append(Artifact.objects.get(conversation_id=other_request.conversation_id))
    on_server(owner, group.coordinator, provider_server)
    provider_server.reply(200, openai_reply("Nothing to see."))
    request = request_create(group=group, text="Look at these.")
    # Stored content naming someone else's artifact (no path of garden writes one).
    request.message.content += [
        {"type": "artifact_ref", "artifact_id": str(a.pk), "kind": "image", "title": "secret.png"}
        for a in foreign
    ]
    request.message.save(update_fields=["content"])
    drive(request, limit=40)
    body = str(provider_server.requests[0].body)
    assert "image_url" not in body and "base64" not in body
    assert all(f"(artifact {a.pk})" in body or f"[artifact {a.pk} " in body for a in foreign)


def test_no_bytes_are_loaded_for_the_scripted_provider(group, owner, provider_server):
    from groups.loop.room import load_room, room_projection
    from groups.services.requests import request_start_next

    request = request_create(group=group, text="A picture:", attachments=[Upload("p.png", PNG)])
    request_start_next(group_id=group.pk)
    request.refresh_from_db()

    def refs(speaker):
        room = load_room(request.pk, request.fence)
        projection = room_projection(room, room.members[speaker.pk], synthesis=False)
        return [b for m in projection.messages for b in m.content if isinstance(b, ArtifactRef)]

    (scripted,) = refs(group.coordinator)
    assert scripted.data is None and scripted.media_type == ""
    on_server(owner, group.coordinator, provider_server)
    group.coordinator.refresh_from_db()
    (carried,) = refs(group.coordinator)
    assert (carried.media_type, carried.data) == ("image/png", PNG)
    # The bytes take no part in comparing or printing a reference.
    assert dataclasses.replace(carried, media_type="") == scripted
    assert "data=" not in repr(carried)


# --- the bounding ----------------------------------------------------------------------------


def test_over_the_cap_pictures_become_line_references_before_any_bytes_are_loaded(
    group, owner, provider_server
):
    """Past the cap the bounding turns the owner's pictures into one-line references, and
    only references still present after it are given bytes."""
    agent = AgentView(id=1, handle="concierge", name="Concierge")
    view = GroupView(id=1, name="T", coordinator_id=1, members=(agent,))
    ref = ArtifactRef(artifact_id="7", kind="image", title="chart.png")
    turns = [
        Turn(
            seq=1,
            speaker_kind="owner",
            speaker_agent_id=None,
            speaker_handle=None,
            content=(TextBlock("x" * 900), ref),
        )
    ]
    projection = project(turns, agent=agent, group=view)
    assert ref in projection.messages[0].content
    cap = projection.char_count() - 5
    bounded = bound(projection, cap)
    assert not any(isinstance(b, ArtifactRef) for m in bounded.messages for b in m.content)
    assert TextBlock(render_ref(ref)) in bounded.messages[0].content

    # The same through the room: the cap just under the room, and the model is sent the line
    # alone.
    from groups.loop.room import load_room, room_projection
    from groups.services.requests import request_start_next

    on_server(owner, group.coordinator, provider_server)
    provider_server.reply(200, openai_reply("Noted."))
    request = request_create(group=group, text="y" * 2_000, attachments=[Upload("c.png", PNG)])
    request_start_next(group_id=group.pk)
    request.refresh_from_db()
    room = load_room(request.pk, request.fence)
    whole = room_projection(room, room.coordinator, synthesis=False)
    assert any(b.data == PNG for m in whole.messages for b in m.content if hasattr(b, "data"))
    group.room_cap_chars = whole.char_count() - 50
    group.save(update_fields=["room_cap_chars"])
    drive(request, limit=40)
    assert request.state == "completed", request.outcome
    picture = Artifact.objects.get()
    body = provider_server.requests[0].body
    assert "image_url" not in str(body) and "base64" not in str(body)
    assert any(
        f"[image: c.png] (artifact {picture.pk})" in m["content"] for m in user_messages(body)
    )


def test_deep_json_is_refused_by_name_not_a_500(api, group):
    before = counts()
    deep = b"[" * 200_000 + b"]" * 200_000
    response = post_form(api, group.pk, {"text": "look", "files": [upload("a.json", deep)]})
    assert refusal(response) == (400, "ATTACHMENT_TYPE_NOT_ALLOWED")
    assert counts() == before


def test_an_owners_attached_bytes_are_capped_and_a_clear_frees_them(api, group, settings):
    from groups.services.groups import group_clear

    settings.GARDEN_MAX_ATTACHMENT_BYTES_PER_OWNER = len(PNG) * 2
    for _ in range(2):
        sent = post_form(api, group.pk, {"text": "look", "files": [upload("a.png", PNG)]})
        assert sent.status_code == 202, sent.content
        api.post(f"/api/groups/{group.pk}/stop")
    before = counts()
    full = post_form(api, group.pk, {"text": "one more", "files": [upload("b.png", PNG)]})
    assert refusal(full) == (409, "ATTACHMENT_STORAGE_FULL")
    assert counts() == before
    # What agents wrote stays; the files attached in the cleared history go, freeing room.
    with transaction.atomic():
        thread = group_conversation_open(group=group)
    written = Artifact.objects.create(
        owner=group.owner, conversation=thread, title="Plan", content="Save."
    )
    group_clear(group=group)
    assert not AttachmentData.objects.exists()
    assert list(Artifact.objects.all()) == [written]  # its thread gone, the document kept
    again = post_form(api, group.pk, {"text": "again", "files": [upload("b.png", PNG)]})
    assert again.status_code == 202, again.content


def test_a_picture_sent_to_one_agent_reaches_its_model_and_no_other_thread_can_name_it(
    owner, provider_server
):
    """In an agent's own room the owner's picture is carried as in a group's; a turn of the
    agent's other conversation naming its id gets the reference, never the bytes."""
    from garden.models import Conversation
    from garden.services.agents import agent_create
    from groups.services.requests import conversation_request_create
    from tests.support.driving import drive

    agent = agent_create(
        owner=owner,
        handle="viewer",
        name="Viewer",
        model_account=model_account_create(owner=owner, name="v", provider="scripted"),
    )
    on_server(owner, agent, provider_server)
    provider_server.reply(200, openai_reply("A bar chart of rent."))
    provider_server.reply(200, openai_reply("I cannot see it here."))
    first = Conversation.objects.create(owner=owner, agent=agent)
    request = conversation_request_create(
        owner=owner,
        conversation=first,
        text="What does the chart show?",
        attachments=[Upload("chart.png", PNG)],
    )
    drive(request)
    picture = Artifact.objects.get()
    parts = openai_parts(provider_server.requests[0].body)
    assert parts[-1] == {
        "type": "image_url",
        "image_url": {"url": "data:image/png;base64," + base64.b64encode(PNG).decode()},
    }
    other = Conversation.objects.create(owner=owner, agent=agent)
    from garden.services.conversations import message_append

    message_append(
        conversation_id=other.pk,
        speaker_kind="owner",
        content=[
            {"type": "artifact_ref", "artifact_id": str(picture.pk), "kind": "image", "title": "x"}
        ],
    )
    again = conversation_request_create(owner=owner, conversation=other, text="And this one?")
    drive(again)
    assert "image_url" not in str(provider_server.requests[1].body)
