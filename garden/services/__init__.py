"""Writes. Each service is keyword-only and named <entity>_<action>."""
