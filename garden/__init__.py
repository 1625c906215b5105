"""The runtime everything else stands on: agents, accounts, conversations, messages."""
