"""Run garden's demo on whatever the settings point at: seed scripted agents, run a turn
through a real worker, print the transcript with speakers."""

from __future__ import annotations

import time

from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from garden.models import Agent, Conversation, Message
from garden.services.agents import agent_builtins_ensure, agent_create, model_account_create
from garden.services.chat import conversation_post_owner_message
from garden.services.conversations import conversation_create
from garden.worker import running_worker

LEDGER_SCRIPT = {
    "rules": [
        {"when": "spend|month|transactions",
         "reply": "Ledger here. This month: income 4,200; spending 3,150 (rent 1,400, groceries "
                  "520, transport 180, eating out 310, subscriptions 90, other 650 incl. a 240 "
                  "work reimbursement not yet repaid). Net 1,050."},
    ],
    "default": "Ledger here: noted.",
}


def print_transcript(stdout, conversation: Conversation) -> None:
    for m in conversation.messages.select_related("speaker_agent").order_by("seq"):
        label = m.speaker_agent.name if m.speaker_agent_id else ("Owner" if m.speaker_kind == "owner" else "garden")
        marker = {"activity": "  · ", "notice": "  ! "}.get(m.kind, "")
        stdout.write(f"{marker}[{m.seq}] {label}: {m.text}")


class Command(BaseCommand):
    help = "Seed demo agents with scripted models, run one turn through a real worker, print it."

    def add_arguments(self, parser):
        parser.add_argument("--timeout", type=float, default=60.0)

    def handle(self, *args, **options):
        call_command("migrate", verbosity=0)
        User = get_user_model()
        owner, _ = User.objects.get_or_create(username="demo", defaults={"email": "demo@example.com"})
        agent_builtins_ensure(owner=owner)
        ledger = Agent.objects.filter(owner=owner, handle="ledger").first()
        if ledger is None:
            account = model_account_create(owner=owner, name="Ledger (scripted)", provider="scripted",
                                           model="scripted", options=LEDGER_SCRIPT)
            ledger = agent_create(owner=owner, handle="ledger", name="Ledger", model_account=account,
                                  colour="#c0392b", instructions="You keep the household ledger.")
        conversation = conversation_create(owner=owner, agent=ledger, title="Demo: 1:1 with Ledger")
        message = conversation_post_owner_message(
            owner=owner, conversation=conversation,
            text="How did this month's spending look?",
        )
        with running_worker():
            deadline = time.monotonic() + options["timeout"]
            while not Message.objects.filter(in_reply_to=message).exists():
                if time.monotonic() > deadline:
                    raise CommandError("the worker did not answer in time")
                time.sleep(0.1)
        self.stdout.write(self.style.MIGRATE_HEADING(f"Conversation: {conversation.title}"))
        print_transcript(self.stdout, conversation)
