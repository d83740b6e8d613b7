"""Prometheus metrics of the daemon (docs/operating.md), on a registry of their own."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

from rungar import __version__

WAIT_BUCKETS = (5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 300, 600, 900, 1800)
CALL_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)


class Metrics:
    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self._daemon(r)
        self._runners(r)
        self._jobs_and_passes(r)
        self._providers(r)

    def _daemon(self, r: CollectorRegistry) -> None:
        self.build_info = Gauge("rungar_build_info", "Build", ["version"], registry=r)
        self.build_info.labels(__version__).set(1)
        self.start_time = Gauge("rungar_start_time_seconds", "Daemon start", registry=r)
        self.active = Gauge(
            "rungar_active",
            "1 while this daemon holds the lease and acts; 0 while it stands by",
            registry=r,
        )
        self.github_requests = Counter(
            "rungar_github_requests", "GitHub REST calls by status code", ["code"], registry=r
        )
        self.jobs_rerun = Counter(
            "rungar_jobs_rerun",
            "Jobs lost with their runner's machine that Rungar re-ran (outcome: rerun, error)",
            ["scale_set", "outcome"],
            registry=r,
        )
        self.job_reasons_written = Counter(
            "rungar_job_reasons_written",
            "Why a job waits, written on GitHub (kind: publish, update, conclude)",
            ["scale_set", "kind"],
            registry=r,
        )
        self.runs_cancelled = Counter(
            "rungar_runs_cancelled",
            "Workflow runs cancelled because no provider could ever take a job's runner",
            ["scale_set"],
            registry=r,
        )
        self.registration_pace = Gauge(
            "rungar_github_registration_pace_per_minute",
            "Registrations per minute the installation keeps to (0: no pace, sent at once)",
            registry=r,
        )
        self.registrations_waiting = Gauge(
            "rungar_github_registrations_waiting",
            "Runner registrations waiting for their turn under GitHub's registration limit",
            registry=r,
        )
        self.registrations_throttled = Counter(
            "rungar_github_registrations_throttled",
            "Registrations GitHub answered 429 (its registration limit)",
            registry=r,
        )
        # Counted, not logged: a flood of forged deliveries must not flood the log too.
        self.webhook_deliveries = Counter(
            "rungar_webhook_deliveries",
            "workflow_job webhook deliveries by outcome (accepted, bad_signature, duplicate...)",
            ["outcome"],
            registry=r,
        )

    def _runners(self, r: CollectorRegistry) -> None:
        self.runners_min = Gauge("rungar_runners_min", "min_runners", ["scale_set"], registry=r)
        self.runners_desired = Gauge(
            "rungar_runners_desired", "Desired runners", ["scale_set"], registry=r
        )
        self.runners_warm = Gauge(
            "rungar_runners_warm",
            "Runners the warm pool keeps ready beyond min_runners",
            ["scale_set"],
            registry=r,
        )
        self.orphaned_runners = Gauge(
            "rungar_orphaned_runners",
            "Runners and registrations of this installation for scale sets no longer configured",
            ["scale_set"],
            registry=r,
        )
        self.paused = Gauge("rungar_scale_set_paused", "Paused", ["scale_set"], registry=r)
        self.runners_current = Gauge(
            "rungar_runners_current", "Runners by state", ["scale_set", "state"], registry=r
        )
        self.created = Counter(
            "rungar_runners_created", "Runners created", ["scale_set", "provider"], registry=r
        )
        self.removed = Counter(
            "rungar_runners_removed",
            "Runners removed",
            ["scale_set", "provider", "reason"],
            registry=r,
        )
        self.lost = Counter(
            "rungar_runners_lost", "Runners lost", ["scale_set", "provider", "reason"], registry=r
        )
        # A runner that ended, or never connected, before it ever connected (a crash loop).
        self.crashed = Counter(
            "rungar_runners_crashed",
            "Runners that ended or never connected before they ever connected",
            ["scale_set", "provider", "reason"],
            registry=r,
        )
        # A runner that exited because GitHub refused its version: never counted as crashed.
        self.outdated = Counter(
            "rungar_runners_outdated",
            "Runners that exited because GitHub refused their runner version as outdated",
            ["scale_set", "provider"],
            registry=r,
        )
        # A provider whose runner is older than GitHub's latest release: days until GitHub
        # stops queueing jobs to it (negative once it has); absent for one that is current.
        self.runner_days_left = Gauge(
            "rungar_provider_runner_days_left",
            "Days until GitHub stops queueing jobs to the provider's runner, which is older "
            "than the latest release (negative once it has)",
            ["provider"],
            registry=r,
        )
        self.crash_loop = Gauge(
            "rungar_crash_loop_runners",
            "Runners in a row that ended before connecting; 0 once one connects",
            ["scale_set", "provider"],
            registry=r,
        )
        self.scale_up_failures = Counter(
            "rungar_scale_up_failures",
            "Runners that could not be created",
            ["scale_set", "reason"],
            registry=r,
        )

    def _jobs_and_passes(self, r: CollectorRegistry) -> None:
        self.jobs_started = Counter(
            "rungar_jobs_started", "Jobs started", ["scale_set"], registry=r
        )
        self.jobs_completed = Counter(
            "rungar_jobs_completed", "Jobs completed", ["scale_set", "result"], registry=r
        )
        self.jobs_assigned = Gauge(
            "rungar_jobs_assigned", "Jobs assigned", ["scale_set"], registry=r
        )
        self.jobs_counted = Gauge(
            "rungar_jobs_counted",
            "Jobs assigned that scaling counts: GitHub's count less those its idle runners "
            "disprove",
            ["scale_set"],
            registry=r,
        )
        self.job_wait = Histogram(
            "rungar_job_wait_seconds",
            "Queued on GitHub until a runner took the job (GitHub's clock)",
            ["scale_set"],
            buckets=WAIT_BUCKETS,
            registry=r,
        )
        self.job_runner_wait = Histogram(
            "rungar_job_runner_wait_seconds",
            "Assigned to the scale set until a runner took the job",
            ["scale_set"],
            buckets=WAIT_BUCKETS,
            registry=r,
        )
        self.create_duration = Histogram(
            "rungar_runner_create_duration_seconds",
            "Registration until machine created, providers tried before included",
            ["scale_set", "provider"],
            buckets=CALL_BUCKETS,
            registry=r,
        )
        self.boot_duration = Histogram(
            "rungar_runner_boot_duration_seconds",
            "Machine created until connected",
            ["scale_set", "provider"],
            buckets=WAIT_BUCKETS,
            registry=r,
        )
        self.last_poll = Gauge(
            "rungar_scale_set_last_poll_timestamp_seconds", "Last poll", ["scale_set"], registry=r
        )
        self.last_reconcile = Gauge(
            "rungar_scale_set_last_reconcile_timestamp_seconds",
            "Last reconcile pass",
            ["scale_set"],
            registry=r,
        )
        self.reconcile_duration = Histogram(
            "rungar_reconcile_duration_seconds",
            "Reconcile pass duration",
            buckets=CALL_BUCKETS,
            registry=r,
        )

    def _providers(self, r: CollectorRegistry) -> None:
        self.provider_reachable = Gauge(
            "rungar_provider_reachable", "Provider answers", ["provider"], registry=r
        )
        self.provider_runners = Gauge(
            "rungar_provider_runners", "Runners per provider", ["scale_set", "provider"], registry=r
        )
        self.provider_reconnects = Counter(
            "rungar_provider_reconnects",
            "Attempts to connect again to a provider whose connection broke once made",
            ["provider"],
            registry=r,
        )
        self.provider_calls = Counter(
            "rungar_provider_calls",
            "Provider calls",
            ["provider", "call", "result"],
            registry=r,
        )
        self.provider_call_duration = Histogram(
            "rungar_provider_call_duration_seconds",
            "Provider call latency",
            ["provider", "call"],
            buckets=CALL_BUCKETS,
            registry=r,
        )

    def app(self, routes: Sequence[Any] = ()) -> Any:
        """The metrics listener's app: ``/metrics``, and any more ``routes`` (Starlette
        ``Route``s) the daemon serves beside it. Served by :mod:`rungar.web.bounded`, on the
        listener's own thread: a route must not touch the engine but through its loop."""
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import Response
        from starlette.routing import Route

        registry = self.registry

        async def metrics(_: Request) -> Response:
            return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

        return Starlette(routes=[Route("/metrics", metrics, methods=["GET"]), *routes])


def health_routes(ready: Callable[[], tuple[bool, str]] | None) -> list[Any]:
    """``/healthz``: 200 while the process serves at all. ``/readyz``: 200 once every scale
    set has its message session or waits for another daemon's, else 503; the body says which.
    ``ready`` is called on the listener's thread, so it must be safe from any thread."""
    from starlette.requests import Request
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route

    async def healthz(_: Request) -> PlainTextResponse:
        return PlainTextResponse("alive\n")

    async def readyz(_: Request) -> PlainTextResponse:
        ok, text = (True, "alive") if ready is None else ready()
        return PlainTextResponse(text + "\n", status_code=200 if ok else 503)

    return [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
    ]
