"""How garden meets browsers: HTTPS (secure cookies, the redirect, HSTS, a TLS proxy in front),
the dashboard's Content Security Policy, and the login lockout (django-axes). Imported whole by
config/settings.py."""

from __future__ import annotations

from datetime import timedelta

from config.env import PRODUCTION, env

# --- HTTPS and browser protections ----------------------------------------------------------
# GARDEN_HTTPS (on in production): cookies only over HTTPS, plain HTTP redirected, HSTS.
# GARDEN_BEHIND_PROXY: trust X-Forwarded-Proto from the TLS-terminating proxy in front (only
# when that proxy sets it and clients cannot reach garden around it).
GARDEN_HTTPS = env.bool("GARDEN_HTTPS", default=PRODUCTION)
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = GARDEN_HTTPS
SESSION_COOKIE_HTTPONLY = True
SECURE_SSL_REDIRECT = GARDEN_HTTPS
# Prometheus scrapes /metrics inside the deployment's network, with its bearer (below).
SECURE_REDIRECT_EXEMPT = [r"^metrics$"]
SECURE_HSTS_SECONDS = env.int("GARDEN_HSTS_SECONDS", default=31_536_000 if GARDEN_HTTPS else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("GARDEN_HSTS_INCLUDE_SUBDOMAINS", default=GARDEN_HTTPS)
SECURE_HSTS_PRELOAD = env.bool("GARDEN_HSTS_PRELOAD", default=False)
if env.bool("GARDEN_BEHIND_PROXY", default=False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
X_FRAME_OPTIONS = "DENY"
# Preloading a domain into browsers is the operator's decision (hstspreload.org), not a default.
SILENCED_SYSTEM_CHECKS = [] if SECURE_HSTS_PRELOAD or not GARDEN_HTTPS else ["security.W021"]

# The dashboard's Content Security Policy (django-csp): scripts and connections from the site
# only; style attributes are allowed (faces carry their colour in one).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'", "'unsafe-inline'"],
        "img-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "frame-ancestors": ["'none'"],
        "form-action": ["'self'"],
        "base-uri": ["'self'"],
        "object-src": ["'none'"],
    },
}

# --- signing in: the login lockout (django-axes), the slow-down, device cookies ----------
# Every sign-in (/dashboard/login/, /admin/login/, the password a new access token asks for)
# goes through authenticate(). After GARDEN_LOGIN_FAILURE_LIMIT wrong passwords for one
# username *from one client address* that pair is refused (429 LOGIN_LOCKED, even with the
# right password) until GARDEN_LOGIN_LOCKOUT_MINUTES have passed since the last failure. The
# lock is the pair, never the username alone nor the address alone: locking a username lets
# anyone lock its person out from anywhere, locking an address locks out everyone behind one
# NAT. Failures are rows in the database, counted under a row lock, so every web process
# counts together; staff lift a lock in the admin (Access attempts) or with
# `manage.py axes_reset_username NAME`. A success resets the pair's count.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
# Trust the TLS proxy's X-Forwarded-For (its last entry) as the client's address; only when
# clients cannot reach garden around the proxy (the same condition as for X-Forwarded-Proto).
GARDEN_BEHIND_PROXY = env.bool("GARDEN_BEHIND_PROXY", default=False)
GARDEN_LOGIN_FAILURE_LIMIT = env.int("GARDEN_LOGIN_FAILURE_LIMIT", default=10)
GARDEN_LOGIN_LOCKOUT_MINUTES = env.int("GARDEN_LOGIN_LOCKOUT_MINUTES", default=15)
AXES_ENABLED = GARDEN_LOGIN_FAILURE_LIMIT > 0
AXES_FAILURE_LIMIT = max(1, GARDEN_LOGIN_FAILURE_LIMIT)
AXES_COOLOFF_TIME = timedelta(minutes=GARDEN_LOGIN_LOCKOUT_MINUTES)
# One list inside the list: username and address together are one lock key (each item of
# the outer list alone would lock).
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_CLIENT_IP_CALLABLE = "dashboard.logins.client_ip"
AXES_LOCKOUT_CALLABLE = "dashboard.logins.lockout_response"
# A browser holding its person's device cookie is not locked (dashboard/logins.py).
AXES_WHITELIST_CALLABLE = "dashboard.logins.known_device"
AXES_HTTP_RESPONSE_CODE = 429
AXES_VERBOSE = False
# Across addresses a username is slowed, never locked (dashboard.logins.SignInMiddleware,
# counted in the cache, so in Redis for every web process): after GARDEN_LOGIN_SLOWDOWN_AFTER
# failures within GARDEN_LOGIN_SLOWDOWN_WINDOW_MINUTES, a sign-in for it waits
# GARDEN_LOGIN_SLOWDOWN_SECONDS after the last failure, doubling with each further failure,
# at most GARDEN_LOGIN_SLOWDOWN_MAX_SECONDS (429 LOGIN_SLOWED with Retry-After). 0 turns the
# slow-down off.
GARDEN_LOGIN_SLOWDOWN_AFTER = env.int("GARDEN_LOGIN_SLOWDOWN_AFTER", default=5)
GARDEN_LOGIN_SLOWDOWN_SECONDS = env.int("GARDEN_LOGIN_SLOWDOWN_SECONDS", default=5)
GARDEN_LOGIN_SLOWDOWN_MAX_SECONDS = env.int("GARDEN_LOGIN_SLOWDOWN_MAX_SECONDS", default=300)
GARDEN_LOGIN_SLOWDOWN_WINDOW_MINUTES = env.int("GARDEN_LOGIN_SLOWDOWN_WINDOW_MINUTES", default=60)
# A successful sign-in leaves a signed device cookie bound to the person for this many days;
# a sign-in as them that presents it skips the slow-down and the pair lock, until
# GARDEN_LOGIN_FAILURE_LIMIT failures were made with it. 0: no device cookies.
GARDEN_LOGIN_DEVICE_DAYS = env.int("GARDEN_LOGIN_DEVICE_DAYS", default=90)
