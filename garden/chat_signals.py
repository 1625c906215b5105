"""Signals of the 1:1 path; receivers are thin and call services."""

from django.dispatch import Signal

# Sent by ``garden.services.chat.chat_reply`` once it stored the answer to an owner turn: the
# agent's reply, or the garden notice that the reply did not come. Sent once per turn, by the
# delivery that stored the answer. kwargs: message_id (the owner turn), reply_id.
chat_replied = Signal()
