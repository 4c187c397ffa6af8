"""Barrel control plane settings: one module, every value from the environment."""

from __future__ import annotations

from pathlib import Path

from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError

from controlplane.env import ConfigError, database_from_url, env_bool, env_float, env_int, env_list, env_str
from controlplane.limits import MAX_BIGINT

BASE_DIR = Path(__file__).resolve().parent.parent

DEBUG = env_bool("BARREL_DEBUG", False)
# A fixed default keeps `make demo` one command; any real deployment sets BARREL_SECRET_KEY.
SECRET_KEY = env_str("BARREL_SECRET_KEY", "barrel-insecure-dev-key-set-BARREL_SECRET_KEY-in-production")
# Team secrets' Fernet keys, comma-separated (controlplane/teams/secrets.py): the first encrypts,
# all decrypt. Unset, one is derived from SECRET_KEY; a deployment sets its own (check --deploy warns).
SECRETS_KEYS = [key.strip() for key in env_str("BARREL_SECRETS_KEYS", "").split(",") if key.strip()]
ALLOWED_HOSTS = env_list("BARREL_ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("BARREL_CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI's files, served by us: /api/docs/ works offline
    "channels",
    "controlplane.teams",
    "controlplane.runs",
    "controlplane.metrics",
    "controlplane.checkpoints",
    "controlplane.tracking",
    "controlplane.evals",
    "controlplane.chat",
    "controlplane.diagnostics",
    "controlplane.scheduling",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    # Before CSRF, which reads form fields: NUL characters refused once, for every view.
    "controlplane.error_views.InputCheckMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
]

ROOT_URLCONF = "controlplane.urls"
ASGI_APPLICATION = "controlplane.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {"context_processors": ["django.template.context_processors.request"]},
    }
]

DATABASE_URL = env_str("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/barrel")
DATABASES = {"default": database_from_url(DATABASE_URL)}
# Under ASGI, Django runs each request's sync code in a thread of its own, so thread-local
# persistent connections (CONN_MAX_AGE) would still open a PostgreSQL connection per request;
# a process-wide psycopg pool hands each request a warm one instead (Django 5.1+).
if env_bool("BARREL_DB_POOL", True):
    DATABASES["default"]["OPTIONS"]["pool"] = {  # type: ignore[index]
        "min_size": 2,
        "max_size": env_int("BARREL_DB_POOL_MAX", 16),
        "timeout": 30,
    }
    DATABASES["default"]["CONN_MAX_AGE"] = 0
# The few statements on a hot path (battles/next's claim) are prepared on their connection
# (controlplane/dbprepared.py); 0 behind a pooler that cannot carry prepared statements.
DB_PREPARE = env_bool("BARREL_DB_PREPARE", True)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env_str("REDIS_URL", "redis://127.0.0.1:6379/0")

CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}}

CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {
            # redis-py 8 reads with a 5 s socket timeout by default, the same 5 s a consumer's
            # blocking receive (BZPOPMIN) waits: an idle watcher's read could time out first and
            # tear its websocket down (django/channels_redis#422). Wait longer than the pop.
            # A connection pooled before a Redis restart fails its next command ("Connection
            # closed by server"); one retry on a fresh connection makes the first websocket after
            # the restart work instead of being told to try again later.
            "hosts": [
                {
                    "address": REDIS_URL,
                    "socket_timeout": 15,
                    "retry": Retry(ExponentialBackoff(cap=0.5, base=0.05), retries=1),
                    "retry_on_error": [RedisConnectionError],
                }
            ],
            # Bounded per-client buffers: a stalled websocket client loses messages (and is told
            # to resync) instead of growing Redis without limit or slowing ingestion.
            "capacity": env_int("BARREL_WS_CAPACITY", 200),
            "expiry": 30,
            "prefix": "barrel:asgi",
        },
    }
}

CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", REDIS_URL)
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_DEFAULT_QUEUE = env_str("BARREL_CELERY_QUEUE", "barrel")
# The Celery worker's CPU priority, as a nice value (0-19, higher yields more): its work is in the
# background (ranking refits of seconds, battle reservations, reconciling), the web server's is a
# person waiting, so where both share cores a request is not queued behind a refit
# (controlplane/celery.py; benchmarks/battles.py measures it). 0 leaves the worker as started.
WORKER_NICE = env_int("BARREL_WORKER_NICE", 10)
if not 0 <= WORKER_NICE <= 19:
    raise ConfigError(f"BARREL_WORKER_NICE must be a nice value from 0 to 19, got {WORKER_NICE}")
RECONCILE_INTERVAL_S = env_float("BARREL_RECONCILE_INTERVAL_S", 2.0)
# The scheduler passes after each submission and each attempt that ends, and from the beat this
# often; a team's past use counts half after each half-life (fair share, as Slurm's decay).
SCHEDULER_INTERVAL_S = env_float("BARREL_SCHEDULER_INTERVAL_S", 5.0)
SCHEDULER_USAGE_HALF_LIFE_S = env_float("BARREL_SCHEDULER_USAGE_HALF_LIFE_S", 24 * 3600.0)
# A run asked to checkpoint and stop for another (preemption) is stopped after this long.
SCHEDULER_PREEMPT_GRACE_S = env_float("BARREL_SCHEDULER_PREEMPT_GRACE_S", 600.0)
# Queued runs' estimated start times are made again this often (apart from the pass).
SCHEDULER_ETA_INTERVAL_S = env_float("BARREL_SCHEDULER_ETA_INTERVAL_S", 10.0)
ROLLUP_SWEEP_INTERVAL_S = env_float("BARREL_ROLLUP_SWEEP_INTERVAL_S", 10.0)
# How often GENERATING evals are settled with their generation runs (reads settle them too).
EVALS_SETTLE_INTERVAL_S = env_float("BARREL_EVALS_SETTLE_INTERVAL_S", 10.0)
# Votes the pair priority behind battles/next may lag the eval's (it is read from the ranking the
# refresh task keeps current, not refitted per request); past it a request refits in-line. 0:
# refit on every request (slow at scale: benchmarks/battles.py measures both).
EVALS_PRIORITY_STALE_VOTES = env_int("BARREL_EVALS_PRIORITY_STALE_VOTES", 200)
# Draw each voter's next battle in a Celery task while they read the one shown (evals/pick.py),
# so battles/next only hands it out; off, every battles/next draws in-line (about 40 ms at 50
# candidates and 20,000 votes, and 20 voters asking at once wait on each other: benchmarks/battles.py).
EVALS_RESERVE_NEXT = env_bool("BARREL_EVALS_RESERVE_NEXT", True)
# With reservations on, the reservation task also writes the body battles/next returns into the
# reservation's row (evals/prepared.py), and battles/next hands it out with one conditional
# UPDATE that returns it; off, it reads and builds the reserved battle from the database
# (benchmarks/battles.py: both).
EVALS_NEXT_PREPARED = env_bool("BARREL_EVALS_NEXT_PREPARED", True)
# With prepared bodies on, a user token's or a session's battles/next is handed out by an ASGI route on threads
# of its own (evals/next_route.py) instead of queueing on Django's one sync thread; off, the view
# does it (benchmarks/battles.py: both).
EVALS_NEXT_ROUTE = env_bool("BARREL_EVALS_NEXT_ROUTE", True)
# While the route hands battles out, the web process's other HTTP requests (votes, pages) wait
# for those hand-outs to be sent, at most this long, and the hand-outs' follow-up work (the next
# reservation's task, the token's last use) starts once none is in flight: 20 voters asking at
# once are answered before the votes the first of them cast next. 0: neither (benchmarks/battles.py: both).
EVALS_NEXT_FIRST_HOLD_S = env_float("BARREL_EVALS_NEXT_FIRST_HOLD_S", 0.25)
# How often replies owed by chat servers that ended are settled (reads of a chat settle it too).
CHAT_SETTLE_INTERVAL_S = env_float("BARREL_CHAT_SETTLE_INTERVAL_S", 5.0)
# The config of a chat server the control plane starts (workers/recipes/chat/config.py), less
# its model: how long it waits idle before it exits, and its sampling bounds.
CHAT_SERVER_CONFIG = {
    "idle_s": env_float("BARREL_CHAT_IDLE_S", 300.0),
    "max_new_tokens": env_int("BARREL_CHAT_MAX_NEW_TOKENS", 128),
    "temperature": env_float("BARREL_CHAT_TEMPERATURE", 0.7),
}
# Run beat as a process of its own (`celery beat`), never embedded in a worker (`worker --beat`):
# a killed worker leaves its embedded beat running. Even so, each periodic task claims its
# interval in Redis (controlplane.celery.once_per_interval), so a second beat doubles nothing.
CELERY_BEAT_SCHEDULE = {
    # expires: a reconcile that could not start in time is dropped, never piled up.
    "runs-reconcile": {
        "task": "runs.reconcile",
        "schedule": RECONCILE_INTERVAL_S,
        "options": {"expires": RECONCILE_INTERVAL_S * 2},
    },
    "scheduling-pass": {
        "task": "scheduling.pass",
        "schedule": SCHEDULER_INTERVAL_S,
        "options": {"expires": SCHEDULER_INTERVAL_S * 2},
    },
    "scheduling-estimate": {
        "task": "scheduling.estimate",
        "schedule": SCHEDULER_ETA_INTERVAL_S,
        "options": {"expires": SCHEDULER_ETA_INTERVAL_S * 2},
    },
    "metrics-roll-up": {
        "task": "metrics.roll_up",
        "schedule": ROLLUP_SWEEP_INTERVAL_S,
        "options": {"expires": ROLLUP_SWEEP_INTERVAL_S * 2},
    },
    "evals-settle": {
        "task": "evals.settle",
        "schedule": EVALS_SETTLE_INTERVAL_S,
        "options": {"expires": EVALS_SETTLE_INTERVAL_S * 2},
    },
    "chat-settle": {
        "task": "chat.settle",
        "schedule": CHAT_SETTLE_INTERVAL_S,
        "options": {"expires": CHAT_SETTLE_INTERVAL_S * 2},
    },
    "diagnostics-stalled": {
        "task": "diagnostics.check_stalled",
        "schedule": 60.0,
        "options": {"expires": 120.0},
    },
}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator", "OPTIONS": {"min_length": 8}},
]
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SAMESITE = "Lax"
# JSON, as every other error body (controlplane.api; the handlers are in controlplane.urls).
CSRF_FAILURE_VIEW = "controlplane.error_views.csrf_failure"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "/static/"
FRONTEND_DIST = Path(env_str("BARREL_FRONTEND_DIST", str(BASE_DIR / "frontend" / "dist")))

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "controlplane.auth.bearer.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": [
        "rest_framework.permissions.IsAuthenticated",
        "controlplane.auth.permissions.RunTokenScope",
    ],
    "DEFAULT_PAGINATION_CLASS": "controlplane.api.Pagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "controlplane.schema.AutoSchema",
    "EXCEPTION_HANDLER": "controlplane.api.exception_handler",
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["controlplane.inputs.JSONParser"],
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Barrel API",
    "DESCRIPTION": (
        "Control plane for RL post-training of language models. Authenticate with a session "
        "or `Authorization: Bearer <token>` (user tokens from POST /api/v1/tokens; run tokens "
        "are valid only for reporting into their own run). Non-finite floats travel as the "
        'strings "NaN", "Infinity" and "-Infinity".'
    ),
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    "SCHEMA_PATH_PREFIX": r"/api/v1",
    # controlplane.urls.IdConverter: a bigint primary key.
    "PATH_CONVERTER_OVERRIDE": {"id": {"type": "integer", "minimum": 0, "maximum": MAX_BIGINT}},
    # Choice sets of the same field name in several components keep names of their own.
    "ENUM_NAME_OVERRIDES": {
        "StatusEnum": "controlplane.runs.models.RunStatus",
        "EvalStatusEnum": "controlplane.evals.models.EvalStatus",
        "GenerationEngineEnum": ["auto", "torch", "vllm"],
        "RoleEnum": "controlplane.teams.models.Role",
        "ChatRoleEnum": "controlplane.chat.models.Role",
        "RecipeGenerateConfigDtypeEnum": ["auto", "float32", "bfloat16", "float16"],
        "RunGroupKindEnum": "controlplane.runs.models.RunGroupKind",
        "CompareSummaryEnum": "controlplane.compare.summaries.SUMMARIES",
        "FailureStatusEnum": ["open", "fixed", "regressed"],
    },
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# Ray / dispatch
RAY_ADDRESS = env_str("BARREL_RAY_ADDRESS", "http://127.0.0.1:8265")
# The URL a Ray job uses to reach this control plane.
BARREL_PUBLIC_URL = env_str("BARREL_PUBLIC_URL", "http://127.0.0.1:8000")
# Ray runs the entrypoint through `/bin/sh -c`; `exec` leaves no shell between Ray's job
# supervisor and the driver, so Ray's stop and its clean-up when the supervisor dies reach the
# driver itself (a killed shell would leave the driver orphaned and still reporting).
JOB_ENTRYPOINT = env_str("BARREL_JOB_ENTRYPOINT", "exec python -m workers.entrypoint")
# Ship the workers package with each job (py_modules) so a remote cluster runs the code the run
# was submitted with; a local head can run the checkout in place instead.
JOB_SHIP_CODE = env_bool("BARREL_JOB_SHIP_CODE", True)
# While Ray cannot be reached or answers "not now" (5xx, 408, 429), a submit is retried for this
# long from its first try, with exponential backoff from DISPATCH_RETRY_BASE_S up to
# DISPATCH_RETRY_MAX_DELAY_S; then the run fails with Ray's last answer. A 4xx (a bad runtime
# env) fails it at once.
DISPATCH_RETRY_S = env_float("BARREL_DISPATCH_RETRY_S", 300.0)
DISPATCH_RETRY_BASE_S = env_float("BARREL_DISPATCH_RETRY_BASE_S", 1.0)
DISPATCH_RETRY_MAX_DELAY_S = env_float("BARREL_DISPATCH_RETRY_MAX_DELAY_S", 30.0)
# A DISPATCHING attempt Ray has not heard of after this long is submitted again (same
# submission_id, so never twice) — repairs a dispatcher that died between row and job.
DISPATCH_STALE_S = env_float("BARREL_DISPATCH_STALE_S", 60.0)
if DISPATCH_RETRY_MAX_DELAY_S >= DISPATCH_STALE_S:
    # A retrying dispatch marks itself alive for DISPATCH_STALE_S at every try; tries further
    # apart would let the reconciler start a second dispatch beside it.
    raise ConfigError(
        f"BARREL_DISPATCH_RETRY_MAX_DELAY_S ({DISPATCH_RETRY_MAX_DELAY_S:g}) must be less than "
        f"BARREL_DISPATCH_STALE_S ({DISPATCH_STALE_S:g})"
    )
LOG_TAIL_CHARS = env_int("BARREL_LOG_TAIL_CHARS", 8000)

# Metrics ingest limits. A request costs a fixed few milliseconds (HTTP, auth, locks, commit)
# on top of about what COPY costs per point, so large batches (importers, backfills) come close
# to the database's own rate; 50k points of 250-character keys are about 16 MB.
METRICS_MAX_POINTS_PER_BATCH = env_int("BARREL_METRICS_MAX_POINTS", 50_000)
METRICS_MAX_BODY_BYTES = env_int("BARREL_METRICS_MAX_BODY_BYTES", 16_000_000)
DATA_UPLOAD_MAX_MEMORY_SIZE = max(METRICS_MAX_BODY_BYTES, 2_621_440) + 1
# Buckets (or raw points) per series in one read; 25k is the page MLflow's get-history returns.
METRICS_MAX_READ_POINTS = env_int("BARREL_METRICS_MAX_READ_POINTS", 25_000)
# Writes to a finished run are accepted for this long (late flushes of the job's reporter).
METRICS_FINISHED_GRACE_S = env_float("BARREL_METRICS_FINISHED_GRACE_S", 300.0)
# Per-token ingest rate limit (requests per second); 0 disables. Batches are large, so a
# well-behaved reporter sends a few requests a second.
METRICS_RATE_LIMIT_RPS = env_float("BARREL_METRICS_RATE_LIMIT_RPS", 100.0)
# Bulk reads (POST /api/v1/metrics/query): at most this many series (runs times keys) in one request.
METRICS_MAX_QUERY_SERIES = env_int("BARREL_METRICS_MAX_QUERY_SERIES", 2_000)
# Prometheus /metrics: when set, scrapes must send `Authorization: Bearer <METRICS_TOKEN>`.
METRICS_TOKEN = env_str("METRICS_TOKEN", "")
# How long a process waits after an append before rolling it up, so that the batches landing
# meanwhile are merged together (controlplane.metrics.merger).
METRICS_ROLLUP_DELAY_S = env_float("BARREL_METRICS_ROLLUP_DELAY_S", 0.25)
# Appended points a process holds for its merger to roll up in numpy (16 bytes each); what does
# not fit is read back and rolled up in SQL, which costs PostgreSQL about as much as storing it.
# 0 rolls everything up in SQL.
METRICS_ROLLUP_HELD_POINTS = env_int("BARREL_METRICS_ROLLUP_HELD_POINTS", 4_000_000)
# Messages (and bytes) a websocket client may have queued before it counts as fallen behind:
# its queue is then dropped and replaced by {"type": "resync"}, and it refetches over REST.
WS_CLIENT_BUFFER = env_int("BARREL_WS_CLIENT_BUFFER", 64)
WS_CLIENT_BUFFER_BYTES = env_int("BARREL_WS_CLIENT_BUFFER_BYTES", 4_000_000)

# Run artifacts (MLflow's artifact proxy under /mlflow, and /api/v1/runs/{id}/artifacts), kept
# through Django's storage API in the storage named "artifacts": a local directory by default,
# or an S3-compatible bucket (AWS S3, MinIO, ...) when BARREL_ARTIFACTS_S3_BUCKET is set.
ARTIFACTS_DIR = env_str("BARREL_ARTIFACTS_DIR", str(BASE_DIR / ".barrel" / "artifacts"))
ARTIFACTS_S3_BUCKET = env_str("BARREL_ARTIFACTS_S3_BUCKET", "")
# The largest one artifact may be; a larger upload is refused with 413 before it is stored.
ARTIFACTS_MAX_UPLOAD_BYTES = env_int("BARREL_ARTIFACTS_MAX_UPLOAD_BYTES", 2**30)
ARTIFACTS_S3_ENDPOINT_URL = env_str("BARREL_ARTIFACTS_S3_ENDPOINT_URL", "")
# Working directories of command runs (POST /teams/{id}/working-dirs), zips kept in the artifacts
# storage: the largest upload, and the most its files may hold unzipped (Ray's GCS keeps each
# package whole, at most 512 MiB).
WORKING_DIR_MAX_BYTES = env_int("BARREL_WORKING_DIR_MAX_BYTES", 100 * 2**20)
WORKING_DIR_MAX_UNZIPPED_BYTES = env_int("BARREL_WORKING_DIR_MAX_UNZIPPED_BYTES", 500 * 2**20)
ARTIFACTS_STORAGE: dict[str, object] = {
    "BACKEND": "django.core.files.storage.FileSystemStorage",
    # An artifact logged again under the same path replaces the old one, as in MLflow.
    "OPTIONS": {"location": ARTIFACTS_DIR, "allow_overwrite": True},
}
if ARTIFACTS_S3_BUCKET:
    ARTIFACTS_STORAGE = {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": ARTIFACTS_S3_BUCKET,
            "endpoint_url": ARTIFACTS_S3_ENDPOINT_URL or None,
            "region_name": env_str("BARREL_ARTIFACTS_S3_REGION", "") or None,
            # Unset: boto3's own chain (AWS_ACCESS_KEY_ID, a profile, an instance role).
            "access_key": env_str("BARREL_ARTIFACTS_S3_ACCESS_KEY_ID", "") or None,
            "secret_key": env_str("BARREL_ARTIFACTS_S3_SECRET_ACCESS_KEY", "") or None,
            "location": env_str("BARREL_ARTIFACTS_S3_PREFIX", ""),
            # MinIO and most other S3-compatible servers want path-style URLs.
            "addressing_style": env_str(
                "BARREL_ARTIFACTS_S3_ADDRESSING_STYLE", "path" if ARTIFACTS_S3_ENDPOINT_URL else "auto"
            ),
            "file_overwrite": True,
            "default_acl": None,
            # A download is staged in a temporary file: in memory up to 1 MB, then on disk (the
            # default, 0, would hold any file whole in memory).
            "max_memory_size": 1 << 20,
        },
    }
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    "artifacts": ARTIFACTS_STORAGE,
}

# MLflow tracking API (/mlflow/api/2.0/mlflow/). The most points one get-history page returns;
# the mlflow client asks for 25,000 and follows next_page_token.
MLFLOW_HISTORY_PAGE_MAX = env_int("BARREL_MLFLOW_HISTORY_PAGE_MAX", 25_000)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("BARREL_LOG_LEVEL", "INFO")},
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}
