"""WSGI entry point (the admin and API without websockets)."""

import os

from django.core.wsgi import get_wsgi_application

from garden import log_format, telemetry

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
log_format.set_role(log_format.WEB)
telemetry.setup_tracing(telemetry.SERVICE_WEB)
application = get_wsgi_application()
