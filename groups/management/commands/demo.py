"""Run garden's demo on whatever the settings point at: seed scripted agents, run a turn
through a real worker, print the transcript with speakers."""

from __future__ import annotations

import time

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from garden.models import Agent, Conversation
from garden.services.accounts import model_account_create
from garden.services.agents import agent_builtins_ensure
from garden.services.conversations import conversation_create
from garden.worker import running_worker
from groups.demo import household_finances, maker_script, trip_group
from groups.models import SYNTHESIS_CALLS, WORKING_CALLS, Approval, GroupRequest
from groups.services.approvals import approval_decide
from groups.services.requests import conversation_request_create, request_create


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


def _state(request: GroupRequest) -> str:
    return GroupRequest.objects.filter(pk=request.pk).values_list("state", flat=True).first()


def wait_until(predicate, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise CommandError("the worker did not finish in time")
        time.sleep(0.05)


class Command(BaseCommand):
    help = (
        "Seed demo agents with scripted models; through a real worker, run a 1:1 exchange in "
        "which Ledger uses a tool, one in which Agent Father renames a group after approval, "
        "and the Household finances group; print the transcripts with speakers."
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
        builtins = agent_builtins_ensure(owner=owner)
        # The starter team, as the dashboard's button makes it (groups.demo.HOUSEHOLD_FINANCES).
        group = household_finances(owner)
        ledger = Agent.objects.get(owner=owner, handle="ledger")
        ledger_chat = conversation_create(owner=owner, agent=ledger, title="Demo: 1:1 with Ledger")
        # A group for Agent Father to rename (back and forth, run after run), on its own script.
        trip = trip_group(owner)
        renamed = "Summer trip" if trip.name != "Summer trip" else "Trip planning"
        father = builtins[Agent.Builtin.MAKER]
        father.model_account = model_account_create(
            owner=owner,
            name="Agent Father's demo script",
            provider="scripted",
            model="scripted",
            options=maker_script(group_id=trip.pk, name=renamed),
        )
        father.save(update_fields=["model_account"])
        father_chat = conversation_create(
            owner=owner, agent=father, title="Demo: asking Agent Father"
        )
        texts = [
            "Review this month's spending and help me decide how much I can save.",
            "@ledger, exclude that reimbursement",
        ]
        timeout = options["timeout"]
        with running_worker(log_path=settings.VAR_DIR / "demo-worker.log"):
            ledger_request = conversation_request_create(
                owner=owner,
                conversation=ledger_chat,
                text="Please remember that our rent is 1,400 a month.",
            )
            father_request = conversation_request_create(
                owner=owner,
                conversation=father_chat,
                text=f"Please rename the group {trip.name!r} to {renamed!r}.",
            )
            wait_until(lambda: _state(father_request) == "awaiting_approval", timeout)
            approval = Approval.objects.get(request=father_request, status="pending")
            approval_decide(user=owner, approval_id=approval.pk, decision="approve")
            requests = [request_create(group=group, text=text) for text in texts]
            for request in [ledger_request, father_request, *requests]:
                wait_until(lambda r=request: GroupRequest.objects.get(pk=r.pk).is_finished, timeout)
        for conversation in (ledger_chat, father_chat):
            self.stdout.write(self.style.MIGRATE_HEADING(f"1:1 conversation: {conversation.title}"))
            print_transcript(self.stdout, conversation)
            self.stdout.write("")
        trip.refresh_from_db()
        self.stdout.write(f"-- the group is now called {trip.name!r}")
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
