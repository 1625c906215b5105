from django.apps import AppConfig


class GroupsConfig(AppConfig):
    name = "groups"
    verbose_name = "groups"

    def ready(self) -> None:
        from garden.credentials import encrypted_field_register
        from garden.event_schema import register_event_type
        from garden.lost_sends import work_lost
        from garden.metrics import register_scrape_gauges

        from . import group_tools, metrics, platform_tools  # noqa: F401  (each registers its tools)
        from .models import WebhookEndpoint
        from .payloads import EVENT_TYPES
        from .signals import request_finished

        # Every live event a group's channel carries, with the serializer of its payload.
        for event_type, serializer in EVENT_TYPES.items():
            register_event_type(event_type, serializer)

        # Webhook signing secrets are re-encrypted with owners' keys (rotate_api_keys).
        encrypted_field_register(model=WebhookEndpoint, field="secret_encrypted", label="webhook")

        # The site's figures at each scrape of /metrics, and each request's ending as it commits.
        register_scrape_gauges(metrics.site_gauges)
        # Redis restarted empty: the queued steps it held are sent again.
        work_lost.connect(_resend_lost, weak=False, dispatch_uid="groups_resend_lost")
        request_finished.connect(
            metrics.on_request_finished, weak=False, dispatch_uid="groups_metrics_finished"
        )


def _resend_lost(**_: object) -> None:
    from .services.request_sweep import requests_resend_lost

    requests_resend_lost()
