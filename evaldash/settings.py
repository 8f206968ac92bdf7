"""evaldash settings: one module, configured from environment variables.

Every variable goes through a small typed helper that refuses a malformed value with a message
naming the variable, so a typo in a deployment fails at start-up instead of behaving oddly.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from django.utils.csp import CSP

BASE_DIR = Path(__file__).resolve().parent.parent

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(
        f"{name}={raw!r} is not a boolean: use one of 1/0, true/false, yes/no"
    )


def env_int(name: str, default: int, *, minimum: int = 0) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw.strip().replace("_", ""))
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a whole number") from None
    if value < minimum:
        raise ImproperlyConfigured(f"{name}={raw!r} must be at least {minimum}")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_url(name: str, default: str = "") -> str:
    """An absolute http(s) address with a host and no query or fragment, without its
    trailing slash ("" when unset)."""
    from urllib.parse import urlsplit

    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip()
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 (a port that is not a number raises here)
    except ValueError:
        parts = None
    if (
        parts is None
        or parts.scheme not in ("http", "https")
        or not parts.hostname
        or parts.query
        or parts.fragment
        or parts.username is not None
        or any(c.isspace() for c in value)
    ):
        raise ImproperlyConfigured(
            f"{name}={raw!r} is not an absolute http(s) address such as "
            "https://evaldash.example (no query, fragment or credentials)"
        )
    return value.rstrip("/")


def refuse_to_start(message: str) -> None:
    """Stop with `message` as the one line a command-line user reads (no traceback); a server
    that imports the settings itself still gets the ImproperlyConfigured to log."""
    previous = sys.excepthook

    def one_line(kind, value, traceback) -> None:
        if isinstance(value, ImproperlyConfigured):
            print(f"evaldash: {value}", file=sys.stderr)
        else:
            previous(kind, value, traceback)

    sys.excepthook = one_line
    raise ImproperlyConfigured(message)


def read_secret_key_file(path: Path) -> str:
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        return ""
    except OSError as exc:
        refuse_to_start(f"EVALDASH_SECRET_KEY_FILE {path} cannot be read: {exc.strerror}")
        raise  # not reached


DEBUG = env_bool("DEBUG", False)
# The key comes from SECRET_KEY, else from the file `scripts/serve` writes once (a random key in
# var/, which git ignores), so commands run in a checkout that has served the demo work as the
# README writes them. A deployment sets SECRET_KEY; with neither, only DEBUG=1 (or the test
# command) starts, on a fixed key that must never serve real users.
SECRET_KEY_FILE = Path(
    os.environ.get("EVALDASH_SECRET_KEY_FILE") or BASE_DIR / "var" / "secret_key"
)
SECRET_KEY = os.environ.get("SECRET_KEY", "") or read_secret_key_file(SECRET_KEY_FILE)
if not SECRET_KEY:
    if not DEBUG and not env_bool("EVALDASH_INSECURE_DEV_KEY", False):
        refuse_to_start(
            "SECRET_KEY is not set: export SECRET_KEY=<a long random string>, "
            "or run scripts/serve once to keep a local key in var/secret_key"
        )
    SECRET_KEY = "insecure-development-key-do-not-deploy"
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"] if DEBUG else [])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

# Browsing needs a login unless the operator opens read access on purpose.
EVALDASH_PUBLIC_READ = env_bool("EVALDASH_PUBLIC_READ", False)
# The dashboard's public address (https://evaldash.example), which the links of the CI gate's
# comment start with (the dashboard's own paths follow); unset, the gate links to the address
# it was asked at.
EVALDASH_PUBLIC_URL = env_url("EVALDASH_PUBLIC_URL")
# Bounds on what one request or archive may bring in.
EVALDASH_MAX_UPLOAD_BYTES = env_int("EVALDASH_MAX_UPLOAD_BYTES", 512 * 1024 * 1024, minimum=1)
# Any other request body (a login, a form) takes at most this much; over either limit a request
# is refused from its Content-Length, before its body is read.
EVALDASH_MAX_REQUEST_BYTES = env_int("EVALDASH_MAX_REQUEST_BYTES", 1024 * 1024, minimum=1024)
EVALDASH_MAX_ARCHIVE_BYTES = env_int("EVALDASH_MAX_ARCHIVE_BYTES", 2 * 1024**3, minimum=1)
EVALDASH_MAX_ARCHIVE_RATIO = env_int("EVALDASH_MAX_ARCHIVE_RATIO", 200, minimum=1)
EVALDASH_MAX_ARCHIVE_MEMBERS = env_int("EVALDASH_MAX_ARCHIVE_MEMBERS", 10_000, minimum=1)
# Shards at least this large are parsed in a second process while this one writes to the
# database (both cores busy); smaller ones, where starting it costs more than it saves, are
# parsed in line. 0 sends every shard to the parser process.
EVALDASH_PARSER_PROCESS_MIN_BYTES = env_int("EVALDASH_PARSER_PROCESS_MIN_BYTES", 4 * 1024**2)
# How many shards of one ingest are parsed at once, each in a process of its own: the one being
# stored, and those after it, whose rows wait in a temporary file until the writer takes them.
EVALDASH_INGEST_PROCESSES = env_int(
    "EVALDASH_INGEST_PROCESSES",
    len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1,
    minimum=1,
)
# Likewise, runs of at least this many attempts are scored in a second process while this
# one reads the attempts and writes the verdicts.
EVALDASH_SCORER_PROCESS_MIN_ATTEMPTS = env_int("EVALDASH_SCORER_PROCESS_MIN_ATTEMPTS", 5000)

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django_htmx",
    "django_filters",
    # Before django_tasks_db: records' `db_worker` (the same worker, with heartbeats and the
    # re-queueing of orphaned tasks) takes the name.
    "records",
    "django_tasks_db",
]

MIDDLEWARE = [
    "evaldash.api_errors.ApiErrorsAsJson",  # first: it sees every other layer's answer
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "evaldash.middleware.RequestGuard",  # before CSRF, which reads the body
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "evaldash.urls"
WSGI_APPLICATION = "evaldash.wsgi.application"
ASGI_APPLICATION = "evaldash.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "django.template.context_processors.csp",
            ],
        },
    },
]

_default_sqlite = BASE_DIR / "var" / "evaldash.sqlite3"
DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL") or f"sqlite:///{_default_sqlite}", conn_max_age=60
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    Path(DATABASES["default"]["NAME"]).parent.mkdir(parents=True, exist_ok=True)
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"]["OPTIONS"] = {
        # A second writer waits for the lock (IMMEDIATE takes it up front, so a reader never has
        # to upgrade mid-transaction and fail) instead of failing with "database is locked".
        "transaction_mode": "IMMEDIATE",
        "timeout": env_int("EVALDASH_SQLITE_TIMEOUT", 60, minimum=1),
        # 16 KiB pages (for a new database file): turn and call rows of a few KB then fit one
        # page instead of spilling into overflow chains, which makes bulk inserts cheaper.
        "init_command": (
            "PRAGMA page_size=16384; PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
        ),
    }
    DATABASES["default"]["TEST"] = {"NAME": str(BASE_DIR / "var" / "test.sqlite3")}

# Heavy work (an upload's ingest, scoring) runs as tasks. The database backend is the one
# backend: the queue is a table, so SQLite serves one machine and PostgreSQL any number of
# workers anywhere (`manage.py db_worker`), with nothing else to run. `immediate` runs each task
# in the process that enqueues it (the test suite uses it; real workers are tested apart).
_TASK_BACKENDS = {
    "database": "django_tasks_db.DatabaseBackend",
    "immediate": "django.tasks.backends.immediate.ImmediateBackend",
}
_task_backend = os.environ.get("EVALDASH_TASK_BACKEND", "database").strip().lower()
if _task_backend not in _TASK_BACKENDS:
    raise ImproperlyConfigured(
        f"EVALDASH_TASK_BACKEND={_task_backend!r} is not one of {', '.join(_TASK_BACKENDS)}"
    )
TASKS = {"default": {"BACKEND": _TASK_BACKENDS[_task_backend]}}
# A running task whose worker has not beaten its heart for this long is queued again.
EVALDASH_TASK_STALE_SECONDS = env_int("EVALDASH_TASK_STALE_SECONDS", 60, minimum=2)
# A task that failed (or whose worker died) this many times is given up and shown as failed.
EVALDASH_TASK_MAX_TRIES = env_int("EVALDASH_TASK_MAX_TRIES", 3, minimum=1)
# An upload whose ingest found the database (or a disk) full keeps its bytes and is tried again
# this many seconds later, without counting a try.
EVALDASH_FULL_RETRY_SECONDS = env_int("EVALDASH_FULL_RETRY_SECONDS", 60, minimum=1)
# At most this many API requests per server process hold their answer (`?wait=`) at once; more
# are answered 503 with Retry-After, so waiting never takes every thread from the pages.
EVALDASH_API_WAITERS = env_int("EVALDASH_API_WAITERS", 4, minimum=0)

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "records:runs"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
# htmx comes with django-htmx, plotly.js's basic bundle with the project (static/vendor): no CDN.
STATICFILES_DIRS = [BASE_DIR / "static"]
# Where an upload's files wait for a task worker, by their stored names (the Upload row keeps
# them): a directory here, or anything Django's STORAGES can name (a shared volume, an object
# store through django-storages). The request parses its body into `.incoming/` inside that
# directory and moves each file into place by a rename; the worker reads them with
# storage.open() and deletes them once the upload is done or has failed for good.
EVALDASH_UPLOAD_DIR = Path(os.environ.get("EVALDASH_UPLOAD_DIR") or BASE_DIR / "var" / "uploads")
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "uploads": {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {"location": str(EVALDASH_UPLOAD_DIR)},
    },
    # Hashed, compressed names for what `collectstatic` has written; plain names (served from the
    # finders) for the rest, so a fresh checkout works without a build step.
    "staticfiles": {"BACKEND": "evaldash.storage.HashedStatic"},
}
EVALDASH_PLAIN_STATIC = env_bool("EVALDASH_PLAIN_STATIC", False)
WHITENOISE_USE_FINDERS = True

FILE_UPLOAD_MAX_MEMORY_SIZE = 2 * 1024 * 1024
FILE_UPLOAD_HANDLERS = [
    "django.core.files.uploadhandler.MemoryFileUploadHandler",
    "evaldash.uploads.UnnamedTemporaryFileUploadHandler",
]
DATA_UPLOAD_MAX_NUMBER_FILES = 200

SESSION_COOKIE_SECURE = env_bool("EVALDASH_SECURE_COOKIES", not DEBUG)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SESSION_COOKIE_HTTPONLY = True
SECURE_HSTS_SECONDS = env_int("EVALDASH_HSTS_SECONDS", 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = SECURE_HSTS_SECONDS > 0
SECURE_HSTS_PRELOAD = SECURE_HSTS_SECONDS > 0
SECURE_SSL_REDIRECT = env_bool("EVALDASH_SSL_REDIRECT", False)
# Behind the one TLS proxy the README asks for, the proxy says the scheme and appends the client's
# address to X-Forwarded-For; without it, both headers are the client's own text and ignored.
EVALDASH_BEHIND_TLS_PROXY = env_bool("EVALDASH_BEHIND_TLS_PROXY", False)
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if EVALDASH_BEHIND_TLS_PROXY else None
X_FRAME_OPTIONS = "DENY"
SECURE_CSP = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF],
    # plotly.js writes its own <style> element and style attributes while drawing.
    "style-src": [CSP.SELF, CSP.UNSAFE_INLINE],
    "img-src": [CSP.SELF, "data:", "blob:"],
    "object-src": [CSP.NONE],
    "base-uri": [CSP.NONE],
    "frame-ancestors": [CSP.NONE],
    "form-action": [CSP.SELF],
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "WARNING")},
}
