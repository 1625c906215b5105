"""ASGI entry point: HTTP through Django, websockets through Channels (served by daphne)."""

import os

from django.core.asgi import get_asgi_application

from garden import log_format, telemetry

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
# Before the application is built: the Django instrumentation adds its middleware.
log_format.set_role(log_format.WEB)
telemetry.setup_tracing(telemetry.SERVICE_WEB)
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from config.routing import websocket_urlpatterns  # noqa: E402
from dashboard.origin import SameOriginValidator  # noqa: E402
from garden.request_ids import WebsocketRequestIds  # noqa: E402

# Both checks, in every mode: the Host must be one of ALLOWED_HOSTS, and the Origin must be the
# site itself (or a trusted origin) — so another site cannot open a room over the owner's cookie.
application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        # Outermost: a refused socket is said in the access log too (garden/request_ids.py).
        "websocket": WebsocketRequestIds(
            AllowedHostsOriginValidator(
                SameOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns)))
            )
        ),
    }
)
