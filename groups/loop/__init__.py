"""The group loop: one step of a request, the tools of a member's reply, asks, the fenced writes, rollover."""
