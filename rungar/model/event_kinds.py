"""What the daemon's event log records: every ``(kind, action)`` and what it means.

Kept apart from :mod:`rungar.engine.report.events` (the log itself) so ``rungar events --help`` can
list the catalogue without loading the engine. docs/events.md documents the same list; a test
keeps the three (this table, the code that records events, the docs) in step.
"""

from __future__ import annotations

# Every (kind, action) the daemon records, with what it means: the documented catalogue.
EVENT_ACTIONS: dict[tuple[str, str], str] = {
    ("runner", "created"): "a provider created its machine (create_duration)",
    ("runner", "adopted"): (
        "a machine with this installation's labels taken into its care (why: "
        "interrupted_create, untracked)"
    ),
    ("runner", "settled"): (
        "a create cut short by a stop left no machine; its registration was removed"
    ),
    ("runner", "connected"): "its runner first showed up on GitHub (boot_duration)",
    ("runner", "job_started"): "it took a job (job_id, repository)",
    ("runner", "machine_gone"): (
        "its machine vanished from its provider's listing; nothing to delete"
    ),
    ("runner", "removed"): (
        "let go (reason: job_completed, scaled_down, ended, requested, orphaned, …)"
    ),
    ("runner", "outdated"): (
        "it exited before connecting because GitHub refused its runner version as outdated; "
        "no crash: its scale set places nothing more on the provider until it reports a newer "
        "runner (runner_version, output)"
    ),
    ("runner", "lost"): "its provider did not answer for unreachable_grace; it is forgotten",
    ("runner", "left_behind"): (
        "the machine of a create given up on appeared on its provider afterwards; it is deleted "
        "there, never adopted (machine_state)"
    ),
    ("provider", "full"): "it refused a create FULL (resource, refusals)",
    ("provider", "failing"): "it refused a create FAILED or INVALID (refusal, refusals)",
    ("provider", "unreachable"): "it did not answer a call; nothing is placed on it",
    ("provider", "reachable"): "it answers again",
    ("provider", "reconnected"): (
        "rungar apply changed how it is reached; new calls go to the new connection, its "
        "runners are kept (changed)"
    ),
    ("provider", "listing_fault"): (
        "its listing said something not believed, once per machine (fault: held_elsewhere, "
        "a machine another provider holds; listed_twice; other_installation; machine, holder)"
    ),
    ("provider", "plugin_exited"): (
        "the provider's plugin process exited on its own and is restarted after a backoff "
        "(the message says its exit code and when)"
    ),
    ("provider", "runner_expiring"): (
        "its runner is older than GitHub's latest release, and GitHub stops queueing jobs to it "
        "within warn_days (or has): told once per change (runner_version, latest, stops_at, "
        "days_left)"
    ),
    ("provider", "held"): "a higher-priority scale set holds it (priority)",
    ("provider", "crash_loop"): (
        "a scale set's runners there ended before they ever connected, the second in a row or "
        "later; the scale set backs off the provider (runner, runners in a row, output: the "
        "runner's last lines)"
    ),
    ("scale_set", "paused"): "rungar scale-sets pause",
    ("scale_set", "waits_for_host"): (
        "its runner waits for a host's expected room rather than go to a priced provider with "
        "overflow: when_host_is_later (provider, host, room_in, confidence, at_limit: the priced "
        "provider was at its own max_runners too)"
    ),
    ("scale_set", "job_rerun"): (
        "a job GitHub failed because its runner was lost with its machine was re-run "
        "(rerun_lost_jobs; job_id, github_job_id, runner)"
    ),
    ("scale_set", "run_cancelled"): (
        "a workflow run was cancelled: no provider could ever take its job's runner "
        "(unservable.cancel_after; repository, run_id)"
    ),
    ("scale_set", "resumed"): "rungar scale-sets resume",
    ("scale_set", "min_runners_changed"): (
        "its schedule moved the min_runners in force (from, to, window)"
    ),
    ("github_app", "failing"): (
        "GitHub refused one of several GitHub Apps (revoked, suspended: 401 or 403); its "
        "registrations go to the others, and it is tried again after app_retry_after (error)"
    ),
    ("github_app", "working"): "a GitHub App GitHub had refused registers runners again",
    ("daemon", "active"): (
        "this daemon (name: its session owner) holds the lease and acts; it adopts first (term)"
    ),
    ("daemon", "standby"): (
        "this daemon gave up the lease and stands by; it forgot its runners (term)"
    ),
}
