"""Every wait the GitHub client and listener take, with its default (docs/github.md).

One frozen value, built from ``github.timing`` in ``rungar.yaml`` and handed to the transport,
the auth chain and each listener, so that no wait is a constant buried in the code.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class GitHubTiming:
    # A listener's backoff after any failed turn (an error answer, a garbled 200, a bug).
    error_backoff_first: float = 1.0
    error_backoff_max: float = 60.0
    # After this many failed turns in a row the message session is deleted and opened anew.
    session_recreate_after: int = 3
    # runner-registration refusing a fresh registration token (401/403): the same token is
    # sent again, waits growing from ``registration_retry_first``, for this long before a new
    # one is minted; a second window with the new token, then the refusal stands.
    registration_retry_window: float = 30.0
    registration_retry_first: float = 1.0
    # A rate-limited answer without Retry-After or a reset time: at least a minute, doubling.
    rate_limit_wait_first: float = 60.0
    rate_limit_wait_max: float = 15 * 60.0
    # Transient failures (connection errors, 5xx except 501): retryablehttp's 1 s … 30 s.
    retry_first: float = 1.0
    retry_max: float = 30.0
    # A 429 from the Actions service or broker without Retry-After: 1, 2, 4, 8 s, each drawn
    # up to ``broker_retry_jitter`` (a fraction) longer so listeners do not retry in step.
    broker_retry_first: float = 1.0
    broker_retry_max: float = 8.0
    broker_retry_jitter: float = 0.25
    # Credentials are renewed this long before they expire (tokens are read for their expiry).
    installation_token_refresh_margin: float = 5 * 60.0
    registration_token_refresh_margin: float = 5 * 60.0
    admin_token_refresh_margin: float = 2 * 60.0  # GARM's; ARC's 60 s left listeners dying
    message_queue_token_refresh_margin: float = 10 * 60.0
    # The installation's runner list is shared by every caller this long (single flight).
    runner_list_max_age: float = 15.0
    # The REST budget is read (``GET /rate_limit``, which costs nothing) at most this often
    # when no REST answer told it more recently; 0 = only from REST answers.
    budget_check_interval: float = 60.0
    # Registration pace (GitHub's JIT-config limit): 0 = at once until GitHub answers 429, then
    # what it took in the trailing minute less ``registration_pace_margin``; a learned pace is
    # forgotten after ``registration_pace_forget`` seconds without a 429. Each whole
    # ``registration_pace_relax`` with no 429 and no registration held back by it halves its
    # wait (0: it never relaxes).
    registrations_per_minute: float = 0.0
    registration_pace_margin: float = 0.02
    registration_pace_forget: float = 3600.0
    registration_pace_relax: float = 60.0
    # Registrations sent and not yet answered, at most (0: no bound), or
    # ``registrations_in_flight_share`` of those GitHub took in the trailing window, if more.
    registrations_in_flight: int = 4
    registrations_in_flight_share: float = 0.02
    # The span GitHub states its registration limit over (a minute).
    registration_pace_window: float = 60.0
    # With several GitHub Apps: one GitHub refused (401/403) is tried again after this long.
    app_retry_after: float = 600.0
    # A connection to GitHub idle this long is closed rather than used again.
    http_keepalive_expiry: float = 5.0

    def __post_init__(self) -> None:
        if self.session_recreate_after < 1:
            raise ValueError("session_recreate_after must be at least 1")
