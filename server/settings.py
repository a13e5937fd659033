"""Django settings, read from environment variables only (docs/settings.md lists them all)."""

from __future__ import annotations

import secrets
import warnings
from pathlib import Path

from . import embedded_pg
from .conf import SettingError, env_bool, env_int, env_list, env_pg_connections, env_str, parse_database_url

BASE_DIR = Path(__file__).resolve().parent.parent

DEBUG = env_bool("DEBUG", False)


def _secret_key() -> str:
    key = env_str("SECRET_KEY")
    if key:
        return key
    if env_str("DATABASE_URL") and not DEBUG:
        # Several machines share that database (web replicas, Celery workers):
        # each would generate its own key, and sessions, CSRF tokens and
        # password-reset links would break between them.
        raise SettingError(
            "SECRET_KEY is not set: it is required when DATABASE_URL is set (a deployment); "
            "set SECRET_KEY to a long random string (python -c 'import secrets; print(secrets.token_urlsafe(50))')"
        )
    # A single-machine set-up (make run: the embedded database) keeps a
    # generated key beside the embedded database.
    path = embedded_pg.home() / "secret_key"
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        key = secrets.token_urlsafe(50)
        path.touch(mode=0o600)
        path.write_text(key + "\n")
        return key


SECRET_KEY = _secret_key()
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "server.apps.ShardlineConfig",
    "dashboard.apps.DashboardConfig",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "server.middleware.DatabaseUnavailableMiddleware",
    # An API query parameter given twice is a 400.
    "server.middleware.SingleQueryValuesMiddleware",
    "server.clock.ServiceClockMiddleware",
]

ROOT_URLCONF = "server.urls"
WSGI_APPLICATION = "server.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

_database_url = env_str("DATABASE_URL")
if _database_url:
    _database = parse_database_url(_database_url)
    DATABASE_IS_EMBEDDED = False
else:
    _database = embedded_pg.database_settings()
    DATABASE_IS_EMBEDDED = True
# Persistent connections: the lease hot path is a few milliseconds, a new
# connection per request would double it.
_database["CONN_MAX_AGE"] = env_int("DATABASE_CONN_MAX_AGE", 300, minimum=0)
# Off by default: a health check is one more round trip on every request. A
# connection broken by a database restart fails one request with a 503 (the
# SDK retries it) and is replaced.
_database["CONN_HEALTH_CHECKS"] = env_bool("DATABASE_CONN_HEALTH_CHECKS", False)
_database["OPTIONS"].setdefault("connect_timeout", env_int("DATABASE_CONNECT_TIMEOUT", 5, minimum=1))
DATABASES = {"default": _database}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

MIGRATION_MODULES = {"shardline": "migrations"}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = Path(env_str("STATIC_ROOT") or BASE_DIR / "staticfiles")
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
# Serve straight from the apps' static folders when collectstatic has not run
# (make run, tests); production images run collectstatic.
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG
# Without collectstatic there is no STATIC_ROOT yet; the finders serve the files.
warnings.filterwarnings("ignore", message="No directory at")

LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

# Cookies: Secure whenever the site is served over HTTPS (SHARDLINE_HTTPS=1;
# DEBUG never turns it on, so plain-HTTP development keeps working), the
# session cookie out of reach of scripts, and never sent on cross-site posts.
SHARDLINE_HTTPS = env_bool("SHARDLINE_HTTPS", False)
SESSION_COOKIE_SECURE = SHARDLINE_HTTPS
CSRF_COOKIE_SECURE = SHARDLINE_HTTPS
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SAMESITE = "Lax"
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
if env_bool("SHARDLINE_BEHIND_PROXY", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# Job creation carries the whole works list (up to SHARDLINE_MAX_WORKS paths).
SHARDLINE_MAX_WORKS = env_int("SHARDLINE_MAX_WORKS", 1_000_000, minimum=1)
SHARDLINE_MAX_BODY_BYTES = env_int("SHARDLINE_MAX_BODY_BYTES", 256 * 1024 * 1024, minimum=1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = SHARDLINE_MAX_BODY_BYTES
# Every other request body (server/body_limits.py): a take, a heartbeat, a form.
SHARDLINE_MAX_REQUEST_BYTES = env_int("SHARDLINE_MAX_REQUEST_BYTES", 1024 * 1024, minimum=1024)
SHARDLINE_DEFAULT_LEASE_TIMEOUT = env_int("SHARDLINE_DEFAULT_LEASE_TIMEOUT", 60, minimum=1, maximum=86400)
SHARDLINE_DEFAULT_MAX_ATTEMPTS = env_int("SHARDLINE_DEFAULT_MAX_ATTEMPTS", 3, minimum=1, maximum=100)
SHARDLINE_MAX_TAKE = env_int("SHARDLINE_MAX_TAKE", 1000, minimum=1)
# The liquid tail (server/services/splits.py): the fewest records a split
# leaves to either side, unless its holder reads fewer in
# splits.PIECE_SECONDS; below twice that a record range is not split.
SHARDLINE_SPLIT_MIN_RECORDS = env_int("SHARDLINE_SPLIT_MIN_RECORDS", 16, minimum=1)
SHARDLINE_TOKEN_CACHE_SECONDS = env_int("SHARDLINE_TOKEN_CACHE_SECONDS", 10, minimum=0)
# The lease statements run as prepared statements of the session
# (server/sql): off only behind a pooler that does not keep a session per
# client (PgBouncer in transaction mode).
SHARDLINE_PREPARED_STATEMENTS = env_bool("SHARDLINE_PREPARED_STATEMENTS", True)

# Where the slicer may read works from: comma-separated local directories
# and/or URL prefixes (s3://bucket/data/). Unset: the server reads no file
# (with DEBUG: any file, with a warning); docker-compose sets /data.
SHARDLINE_DATA_ROOTS = env_list("SHARDLINE_DATA_ROOTS", [])
# The Postgres databases table works may name (postgresql://NAME?table=...),
# one SHARDLINE_PG_CONNECTION_<NAME> URL each, with its own credentials.
SHARDLINE_PG_CONNECTIONS = env_pg_connections()

# /metrics answers only `Authorization: Bearer <this>` when set (Prometheus's
# `authorization` scrape setting); unset, it is open like /healthz.
SHARDLINE_METRICS_TOKEN = env_str("SHARDLINE_METRICS_TOKEN", "")

# Login form: after this many failed logins for one username from one address
# within the window, that pair is refused until the window ends.
SHARDLINE_LOGIN_MAX_FAILURES = env_int("SHARDLINE_LOGIN_MAX_FAILURES", 5, minimum=1)
SHARDLINE_LOGIN_WINDOW_SECONDS = env_int("SHARDLINE_LOGIN_WINDOW_SECONDS", 900, minimum=1)
# ... and after this many failed logins from one address over all names, the address.
SHARDLINE_LOGIN_MAX_FAILURES_PER_ADDRESS = env_int("SHARDLINE_LOGIN_MAX_FAILURES_PER_ADDRESS", 50, minimum=1)

# Celery: Redis (or any kombu URL) in deployments; with none, a filesystem
# broker beside the embedded database, so a single machine needs no server.
_broker_folder = embedded_pg.home() / "broker"
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL") or "filesystem://"
if CELERY_BROKER_URL == "filesystem://":
    for _sub in ("queue", "processed", "control"):
        (_broker_folder / _sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_folder / "queue"),
        "data_folder_out": str(_broker_folder / "queue"),
        "data_folder_processed": str(_broker_folder / "processed"),
        "store_processed": False,
        # Remote-control mailboxes too (kombu's default is ./control).
        "control_folder": str(_broker_folder / "control"),
    }
    # The login throttle's counters are shared by every process of this machine.
    _throttle_cache = {
        "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
        "LOCATION": str(embedded_pg.home() / "throttle"),
    }
else:
    # The login throttle's counters are shared by every web replica.
    _throttle_cache = (
        {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": CELERY_BROKER_URL,
            "KEY_PREFIX": "shardline-throttle",
        }
        if CELERY_BROKER_URL.startswith(("redis://", "rediss://"))
        else {
            "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
            "LOCATION": str(embedded_pg.home() / "throttle"),
        }
    )
    # A task whose worker died unacknowledged is handed out again after this
    # long (Redis and SQS brokers).
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "visibility_timeout": env_int("SHARDLINE_CELERY_VISIBILITY_TIMEOUT", 3600, minimum=1)
    }
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    "throttle": _throttle_cache,
}
CELERY_TASK_DEFAULT_QUEUE = env_str("SHARDLINE_CELERY_QUEUE", "shardline")
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_IGNORE_RESULT = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_WORKER_HIJACK_ROOT_LOGGER = False

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "server.api.auth.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["server.api.permissions.ByTable"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"]
    + (["rest_framework.renderers.BrowsableAPIRenderer"] if DEBUG else []),
    "DEFAULT_PARSER_CLASSES": ["server.api.parsers.StrictJSONParser"],
    "DEFAULT_PAGINATION_CLASS": "server.api.pagination.Pagination",
    "PAGE_SIZE": 50,
    "EXCEPTION_HANDLER": "server.api.errors.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
    # `?format=csv` is the audit export's own parameter, not a renderer switch.
    "URL_FORMAT_OVERRIDE": None,
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Shardline API",
    "DESCRIPTION": "Jobs, epochs and item leases for distributed training data dispatch.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": {
        "TokenStateEnum": "server.selectors.TOKEN_STATES",
        # Jobs and items both have a `state`: named, not numbered, in the schema and the docs.
        "JobStateEnum": "server.models.JobState",
        "ItemStateEnum": "server.models.ItemState",
    },
    # Every operation's error answers, strict request bodies, query bounds (server/api/schema.py).
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums", "server.api.schema.postprocess"],
}

LOG_LEVEL = env_str("LOG_LEVEL", "INFO")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"kv": {"()": "server.logging.KeyValueFormatter"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "kv"}},
    "root": {"handlers": ["console"], "level": "WARNING"},
    "loggers": {
        "shardline": {"handlers": ["console"], "level": LOG_LEVEL, "propagate": False},
        "django.request": {"handlers": ["console"], "level": "ERROR", "propagate": False},
    },
}

SHARDLINE_PORT = env_int("SHARDLINE_PORT", 8000, minimum=1, maximum=65535)
