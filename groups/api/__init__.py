"""The groups API under /api/groups: DRF views, their serializers and routes."""
