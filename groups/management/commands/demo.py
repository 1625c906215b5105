"""Run garden's demo on whatever the settings point at: seed scripted agents, run a turn
through a real worker, print the transcript with speakers."""

from __future__ import annotations

import time

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from garden.models import Agent, Conversation, Message
from garden.services.accounts import model_account_create
from garden.services.agents import agent_builtins_ensure, agent_create
from garden.services.chat import conversation_post_owner_message
from garden.services.conversations import conversation_create
from garden.worker import running_worker
from groups.demo import LEDGER_SCRIPT, household_finances
from groups.models import SYNTHESIS_CALLS, WORKING_CALLS, GroupRequest
from groups.services.requests import request_create


def print_transcript(stdout, conversation: Conversation, request=None) -> None:
    messages = conversation.messages.select_related("speaker_agent").order_by("seq")
    if request is not None:
        messages = messages.filter(request=request)
    for m in messages:
        label = (
            m.speaker_agent.name
            if m.speaker_agent_id
            else ("Owner" if m.speaker_kind == "owner" else "garden")
        )
        marker = {"activity": "  · ", "notice": "  ! ", "coordination": "  → "}.get(m.kind, "")
        text = m.text or "; ".join(_describe(b) for b in m.content)
        stdout.write(f"{marker}[{m.seq}] {label}: {text}")


def _describe(block: dict) -> str:
    if block.get("type") == "tool_call":
        return f"calls {block['name']}({block.get('arguments', {})})"
    if block.get("type") == "tool_result":
        first = str(block.get("content", "")).splitlines()[0] if block.get("content") else ""
        return f"tool result: {first}"
    return str(block.get("type"))


def wait_until(predicate, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise CommandError("the worker did not finish in time")
        time.sleep(0.05)


class Command(BaseCommand):
    help = (
        "Seed demo agents with scripted models, run a 1:1 turn and the Household finances "
        "group through a real worker, and print the transcripts with speakers."
    )

    def add_arguments(self, parser):
        parser.add_argument("--timeout", type=float, default=60.0)

    def handle(self, *args, **options):
        call_command("migrate", verbosity=0)
        User = get_user_model()
        owner, made = User.objects.get_or_create(
            username="demo", defaults={"email": "demo@example.com"}
        )
        if made:
            # The demo's owner runs the script; nobody signs in as it.
            owner.set_unusable_password()
            owner.save(update_fields=["password"])
        agent_builtins_ensure(owner=owner)
        ledger = Agent.objects.filter(owner=owner, handle="ledger").first()
        if ledger is None:
            account = model_account_create(
                owner=owner,
                name="Ledger (scripted)",
                provider="scripted",
                model="scripted",
                options=LEDGER_SCRIPT,
            )
            ledger = agent_create(
                owner=owner,
                handle="ledger",
                name="Ledger",
                model_account=account,
                colour="#c0392b",
                instructions="You keep the household ledger.",
            )
        conversation = conversation_create(owner=owner, agent=ledger, title="Demo: 1:1 with Ledger")
        message = conversation_post_owner_message(
            owner=owner,
            conversation=conversation,
            text="How did this month's spending look?",
        )
        group = household_finances(owner)
        texts = [
            "Review this month's spending and help me decide how much I can save.",
            "@ledger, exclude that reimbursement",
        ]
        with running_worker(log_path=settings.VAR_DIR / "demo-worker.log"):
            wait_until(
                lambda: Message.objects.filter(in_reply_to=message).exists(), options["timeout"]
            )
            requests = []
            for text in texts:
                requests.append(request_create(group=group, text=text))
            for request in requests:
                wait_until(
                    lambda r=request: GroupRequest.objects.get(pk=r.pk).is_finished,
                    options["timeout"],
                )
        self.stdout.write(self.style.MIGRATE_HEADING(f"1:1 conversation: {conversation.title}"))
        print_transcript(self.stdout, conversation)
        self.stdout.write("")
        self.stdout.write(
            self.style.MIGRATE_HEADING(
                f"Group: {group.name} "
                f"(coordinator @{group.coordinator.handle}; members "
                + ", ".join(f"@{m.agent.handle}" for m in group.memberships.select_related("agent"))
                + ")"
            )
        )
        for request in requests:
            request.refresh_from_db()
            self.stdout.write(
                f"-- request {request.pk}: {request.state}; budget used: "
                f"{request.working_reserved}/{WORKING_CALLS} working, "
                f"{request.synthesis_reserved}/{SYNTHESIS_CALLS} synthesis"
            )
            print_transcript(self.stdout, request.conversation, request=request)
