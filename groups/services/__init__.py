"""Writes for groups, their requests and their budget."""
