"""The shape of scale_sets.yaml, declared once: the loader checks against it, and
:func:`json_schema` renders it as the committed ``config/scale_sets.schema.json``.

Rules and defaults (docs/configuration.md, "Rules between keys"): ``weight`` positive and
finite, ``max_runners`` 1..10000, ``start_timeout`` at least 30 s, ``reconcile_interval`` at least
5 s. Rules between two keys (``min_runners`` ≤ ``max_runners``, ``max_age`` ≥ ``start_timeout``,
provider references) live in the loader and are stated in the descriptions here.

Regenerate the JSON file with ``python -m rungar.config.schema > config/scale_sets.schema.json``.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from rungar.config.model import HoldChoice, Placement, Timing

MAX_RUNNERS = 10_000
NAME_MAX = 45  # <name>-<8 hex> must stay a host name of at most 63 characters
DURATION_PATTERN = r"^(\d+(\.\d+)?(ms|s|m|h|d|w))+$"
SIZE_PATTERN = r"^\d+(\.\d+)?\s*([KMGTPkmgtp]([iI]?[bB])?)?$"


@dataclass(frozen=True, slots=True)
class Str:
    pattern: str | None = None
    hint: str = ""  # what the pattern means, for the message when a value does not match
    max_length: int | None = None


@dataclass(frozen=True, slots=True)
class Int:
    minimum: int | None = None
    maximum: int | None = None


@dataclass(frozen=True, slots=True)
class PositiveNumber:
    """Positive and finite: ``.nan`` and ``.inf`` are refused."""


@dataclass(frozen=True, slots=True)
class Bool:
    pass


@dataclass(frozen=True, slots=True)
class Duration:
    """Seconds: a number, or text such as ``30s``, ``2m``, ``1h30m``."""

    minimum: float = 0.0
    above_minimum: bool = False  # strictly greater than ``minimum``
    nullable: bool = False


@dataclass(frozen=True, slots=True)
class Size:
    """Bytes: a number, or text such as ``512MiB``, ``8GiB``, ``6G``."""


@dataclass(frozen=True, slots=True)
class Enum:
    values: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ListOf:
    item: Type
    min_items: int = 0
    unique: bool = False


@dataclass(frozen=True, slots=True)
class AnyMapping:
    """A free mapping (a runner block), kept as plain data."""


@dataclass(frozen=True, slots=True)
class Field:
    name: str
    type: Type
    description: str
    required: bool = False
    default: Any = None


@dataclass(frozen=True, slots=True)
class Obj:
    fields: tuple[Field, ...]
    extra: bool = False  # accept keys not listed (a provider type Rungar does not know)
    free_prefix: str = ""  # keys with this prefix are skipped: ``x-`` holds anchors to reuse

    def field(self, name: str) -> Field | None:
        for f in self.fields:
            if f.name == name:
                return f
        return None


@dataclass(frozen=True, slots=True)
class NameOrObj:
    """A scalar read as ``name``, or a mapping read as ``obj``."""

    name: Str
    obj: Obj


Type = (
    Str
    | Int
    | PositiveNumber
    | Bool
    | Duration
    | Size
    | Enum
    | ListOf
    | AnyMapping
    | Obj
    | NameOrObj
)

SCALE_SET_NAME = Str(
    pattern=r"^[A-Za-z0-9][A-Za-z0-9-]*$",
    hint="letters, digits and '-', starting with a letter or digit",
    max_length=NAME_MAX,
)
PROVIDER_NAME = Str(
    pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$",
    hint="letters, digits, '-', '_' and '.', starting with a letter or digit",
    max_length=63,
)
# The kernel's limit on a unix socket's path: sun_path holds 108 bytes, its final NUL included.
UNIX_PATH_MAX = 107


def unix_path_problem(address: str) -> str:
    """Why a ``unix:///path`` address cannot be bound or reached, or ""."""
    if not address.startswith("unix://"):
        return ""
    size = len(address[len("unix://") :].encode())
    if size <= UNIX_PATH_MAX:
        return ""
    return (
        f"the socket path is {size} bytes long; the kernel allows at most {UNIX_PATH_MAX}: "
        "use a shorter path"
    )


ADDRESS = Str(
    pattern=r"^(unix:\S+|\[[0-9A-Fa-f:.]+\]:\d{1,5}|[A-Za-z0-9_.-]+:\d{1,5})$",
    hint="unix:///path/to.sock, unix:relative/to.sock or host:port",
)
TEXT = Str()
TEXTS = ListOf(TEXT)

PROVIDER_COMMON = (
    Field("name", PROVIDER_NAME, "Unique name; scale sets refer to the provider by it.", True),
    Field(
        "type",
        Str(pattern=r"^[a-z][a-z0-9_-]*$", hint="lower-case letters, digits, '-' and '_'"),
        "Provider type: runnerd, gcp, aws, fake, or another plugin's own type.",
        True,
    ),
    Field(
        "weight",
        PositiveNumber(),
        "Spread counts runners ÷ weight; pack tries the highest weight first.",
        default=1,
    ),
    Field(
        "max_runners",
        Int(1, MAX_RUNNERS),
        "Most runners of every scale set on this provider; unset = no limit of our own.",
    ),
    Field("disabled", Bool(), "Skipped by every scale set while true.", default=False),
    Field(
        "runner",
        AnyMapping(),
        "Base runner block; a scale set's block is laid over it.",
        default={},
    ),
    Field(
        "address",
        ADDRESS,
        "Where the provider listens; a relative unix: path is relative to this file's folder. "
        "Set this or command; runnerd needs it; gcp and aws with neither start their shipped "
        "plugin.",
    ),
    Field(
        "command",
        ListOf(TEXT, min_items=1),
        "A local provider plugin to start; a program given as a relative path (./bin/x) is "
        "relative to this file's folder, a bare name is looked up on PATH. Set this or address; "
        "overrides gcp's and aws's shipped plugin.",
    ),
    Field(
        "timeout",
        Duration(above_minimum=True),
        (
            "Deadline of this provider's List, Info, ValidateRunner and UpdateRunner calls; "
            "unset = timing.provider_timeout. Not of Create (start_timeout) nor Delete "
            "(timing.delete_timeout)."
        ),
    ),
    Field(
        "price_per_hour",
        PositiveNumber(),
        "Price of one runner-hour on this provider, in your currency; `rungar usage` and the "
        "fleet page's Usage tab show cost for the jobs that ran here; idle reserve runners go "
        "to the cheapest provider that takes them, and move off a priced one when a cheaper "
        "one has room (docs/placement.md). Unset = no cost shown, and counted as "
        "free.",
    ),
    Field(
        "overflow_after",
        Duration(),
        "Opt-in: this provider takes a scale set's runner only once the scale set's assigned "
        "jobs have waited this long for room on its other providers (from the first time they "
        "found none, while they keep asking, until another provider takes one of its runners); "
        "idle reserve refills never come here before that. For a priced cloud behind hosts: "
        "fewer cloud hours for some waiting (docs/placement.md). Unset = 0, taken at once.",
    ),
    Field(
        "overflow",
        Enum(("at_once", "when_host_is_later")),
        "Opt-in: when_host_is_later keeps a scale set's runner that cheaper providers refused "
        "as full off this provider while one of them expects room (its refusal says when) "
        "sooner than this provider's typical start plus overflow_margin: it waits for that "
        "provider and is tried there at the expected time (docs/placement.md). at_once = taken "
        "at once, as without it.",
        default="at_once",
    ),
    Field(
        "overflow_margin",
        Duration(),
        "With overflow: when_host_is_later, how much longer than this provider's typical start "
        "a host's expected room may be for the runner to wait for it.",
        default=180.0,
    ),
    Field(
        "typical_start",
        Duration(above_minimum=True),
        "With overflow: when_host_is_later, this provider's start (from its Create to the "
        "runner online) until 5 of its own runners have been measured; then the median of "
        "its last 20.",
        default=60.0,
    ),
)
COMMON_KEYS = frozenset(f.name for f in PROVIDER_COMMON)

PROVIDER_TYPES: dict[str, tuple[Field, ...]] = {
    "runnerd": (
        Field(
            "tls",
            Obj(
                (
                    Field("ca_file", TEXT, "CA bundle that signed runnerd's certificate."),
                    Field("cert_file", TEXT, "Client certificate (with key_file)."),
                    Field("key_file", TEXT, "Client key (with cert_file)."),
                    Field("server_name", TEXT, "Name expected in runnerd's certificate."),
                )
            ),
            "mTLS to a TCP address; refused on unix: addresses. Relative files are relative to "
            "this file's folder.",
        ),
        Field(
            "token_file",
            TEXT,
            "File holding the bearer token runnerd expects; relative to this file's folder.",
        ),
    ),
    "gcp": (
        Field("project", TEXT, "GCP project.", True),
        Field("zones", ListOf(TEXT, min_items=1, unique=True), "Zones of one region.", True),
        Field("network", TEXT, "VPC network."),
        Field("subnetwork", TEXT, "Subnetwork."),
        Field("external_ip", Bool(), "Give instances an external IP.", default=True),
        Field("service_account", TEXT, "Service account of the instances."),
        Field("scopes", TEXTS, "OAuth scopes of the instances."),
        Field(
            "credentials_file",
            TEXT,
            "Key or WIF config (relative to this file's folder); unset = application default.",
        ),
        Field("impersonate_service_account", TEXT, "Service account to impersonate."),
    ),
    "aws": (
        Field("region", TEXT, "AWS region.", True),
        Field("subnets", ListOf(TEXT, min_items=1, unique=True), "Subnets, tried in order."),
        Field("security_groups", TEXTS, "Security groups of the instances."),
        Field("public_ip", Bool(), "Give instances a public IP."),
        Field("instance_profile", TEXT, "IAM instance profile."),
        Field("profile", TEXT, "Credentials profile."),
        Field("credentials_file", TEXT, "Shared credentials file; relative to this file's folder."),
    ),
    "fake": (
        Field("vcpus", PositiveNumber(), "Room in vCPUs; unset = unlimited."),
        Field("memory", Size(), "Room in memory; unset = unlimited."),
        Field("latency", Duration(), "How long each call takes.", default=0),
        Field("refuse", Enum(("full", "invalid", "failed")), "Refuse every create with this kind."),
        Field("unanswered", Bool(), "Answer nothing, as an unreachable provider.", default=False),
    ),
}


# The runner keys of the provider types whose keys Rungar knows offline; a block with another
# key is refused (rungar validate, apply). runnerd's are its typed keys and the profile it names.
# The cloud plugins' are their own RUNNER_KEYS beside the typed ones (tests hold them equal).
_TYPED = ("vcpus", "memory", "disk", "image")
RUNNER_KEYS: dict[str, tuple[str, ...]] = {
    "runnerd": (*_TYPED, "profile"),
    "gcp": (
        *_TYPED, "machine_type", "disk_size", "disk_type", "instance_template", "spot",
        "network_tags", "labels", "metadata", "startup_script", "runner_version",
    ),
    "aws": (
        *_TYPED, "instance_type", "disk_size", "disk_type", "disk_iops", "disk_throughput",
        "launch_template", "spot", "tags", "user_data", "runner_version",
    ),
}  # fmt: skip


def provider_obj(provider_type: str | None) -> Obj:
    """The keys a provider of ``provider_type`` may have; any extra key for an unknown type."""
    own = PROVIDER_TYPES.get(provider_type or "")
    if own is None:
        return Obj(PROVIDER_COMMON, extra=True)
    return Obj(PROVIDER_COMMON + own)


PROVIDER_REF = NameOrObj(
    PROVIDER_NAME,
    Obj(
        (
            Field("name", PROVIDER_NAME, "A provider of providers[].", True),
            Field("runner", AnyMapping(), "Laid over the provider's runner block.", default={}),
        )
    ),
)

SCHEDULE_WINDOW = Obj(
    (
        Field(
            "days",
            Str(),
            "mon..sun, or ranges such as mon-fri that may wrap (fri-mon), or a comma list.",
            True,
        ),
        Field(
            "from",
            Str(pattern=r"^\d\d:\d\d$", hint="HH:MM such as 08:00, quoted"),
            "Opens at HH:MM (quote it); not 24:00.",
            True,
        ),
        Field(
            "to",
            Str(pattern=r"^\d\d:\d\d$", hint="HH:MM such as 08:00, quoted"),
            "Closes at HH:MM; 24:00 allowed; before from = runs past midnight; not from.",
            True,
        ),
        Field(
            "min_runners",
            Int(0, MAX_RUNNERS),
            "min_runners while the window is open; at most max_runners.",
            default=0,
        ),
    )
)
SCHEDULE = Obj(
    (
        Field(
            "timezone",
            Str(),
            "IANA zone of the windows; unset = UTC, never the host's; Local is refused.",
            default="UTC",
        ),
        Field(
            "windows",
            ListOf(SCHEDULE_WINDOW, min_items=1),
            "The first window that matches, in written order, sets min_runners.",
            True,
        ),
    )
)

WARM_POOL = Obj(
    (
        Field(
            "max",
            Int(1, MAX_RUNNERS),
            "Most runners the warm pool keeps ready on top of min_runners; min_runners (and each "
            "schedule window's) plus this is at most max_runners.",
            True,
        ),
        Field(
            "slot",
            Duration(60.0),
            "Length of the time-of-day slots jobs are counted in; divides a day into whole "
            "minutes.",
            default=900,
        ),
        Field(
            "lookback",
            Int(1, 60),
            "Days of the same kind (weekdays, or weekend days) the slot is counted on.",
            default=5,
        ),
        Field(
            "percentile",
            Int(1, 100),
            "Percentile of those days' job counts that is kept ready.",
            default=90,
        ),
        Field(
            "ahead",
            Duration(),
            "A slot's runners are started this long before it opens.",
            default=300,
        ),
        Field(
            "timezone",
            Str(),
            "IANA zone of the slots; unset = the schedule's timezone, else UTC.",
        ),
    )
)

SCALE_SET = Obj(
    (
        Field("name", SCALE_SET_NAME, "Runner-name base; unique ignoring case.", True),
        Field("labels", ListOf(TEXT, unique=True), "Labels jobs ask for (runs-on).", default=[]),
        Field("runner_group", TEXT, "GitHub runner group.", default="Default"),
        Field(
            "min_runners",
            Int(0, MAX_RUNNERS),
            "Idle reserve: runners kept idle beyond the assigned jobs; at most max_runners.",
            default=0,
        ),
        Field("max_runners", Int(1, MAX_RUNNERS), "Most runners on all providers together.", True),
        Field(
            "priority",
            Int(-(2**31), 2**31 - 1),
            "Higher holds lower ones off every provider it found full; room that opens there "
            "is its own first (docs/placement.md).",
            default=0,
        ),
        Field(
            "hold",
            Enum(tuple(h.value for h in HoldChoice)),
            "Which providers found full a priority holds: every_full, every one; soonest_room "
            "(opt-in), the one whose refusal expects room for its runner soonest, those within "
            "hold_margin of it, those that said nothing of when, and those it holds already "
            "(docs/placement.md).",
            default="every_full",
        ),
        Field(
            "hold_margin",
            Duration(),
            "With hold: soonest_room, how much later than the soonest a provider's expected "
            "room may be for it to be held too.",
            default=0.0,
        ),
        Field(
            "placement",
            Enum(tuple(p.value for p in Placement)),
            "Order providers are tried in.",
            default="spread",
        ),
        Field(
            "providers",
            ListOf(PROVIDER_REF, min_items=1),
            "Provider names, or {name, runner}; each at most once.",
            True,
        ),
        Field(
            "start_timeout",
            Duration(30.0),
            (
                "Time a runner has to connect, counted from its registration with GitHub (a "
                "wait for GitHub's pace before it does not count); its Create calls get what is "
                "left of it as their deadline; unset = timing.start_timeout."
            ),
        ),
        Field(
            "max_idle_age",
            Duration(),
            "An idle runner older than this is replaced; at least start_timeout.",
        ),
        Field(
            "max_age", Duration(), "A runner older than this is replaced; at least start_timeout."
        ),
        Field("paused", Bool(), "Creates nothing while true.", default=False),
        Field(
            "rerun_lost_jobs",
            Bool(),
            "Re-run once, through GitHub's REST API, a job GitHub failed because its runner was "
            "lost with its machine; needs the token's actions: write permission.",
            default=False,
        ),
        Field(
            "unservable",
            Obj(
                (
                    Field(
                        "cancel_after",
                        Duration(0.0, above_minimum=True),
                        "A job waiting this long whose runner no provider can ever take (each "
                        "refused it INVALID, or has not answered for this long) has its workflow "
                        "run cancelled through GitHub's REST API, the reason on its check run; "
                        "never for a job waiting on a full provider, a hold or a backoff. Needs "
                        "actions: write.",
                        required=True,
                    ),
                )
            ),
            "End a job that can never be served quickly; unset = it waits.",
        ),
        Field("schedule", SCHEDULE, "Time-of-day min_runners; unset = min_runners always."),
        Field(
            "warm_pool",
            WARM_POOL,
            "Runners kept ready ahead of the demand the job history predicts; unset = none.",
        ),
    )
)

# Minimums of the timing block (seconds, and whether strictly above); any other field is ≥ 0.
TIMING_MINIMUMS: dict[str, tuple[float, bool]] = {
    "reconcile_interval": (5.0, False),
    "backoff_first": (0.0, True),
    "backoff_max": (0.0, True),
    "hold": (0.0, True),
    "delete_timeout": (0.0, True),
    "provider_timeout": (0.0, True),
    "probe_interval": (0.0, True),
    "start_timeout": (30.0, False),
    "session_retry_first": (0.0, True),
    "session_retry_max": (0.0, True),
    "crash_backoff_first": (0.0, True),
    "crash_backoff_max": (0.0, True),
    "starting_sync_interval": (0.0, True),
    "stale_statistics_after": (0.0, True),
    "lease_duration": (0.0, True),
    "lease_renew_interval": (0.0, True),
    "standby_retry": (0.0, True),
    "rerun_memory": (0.0, True),
}
TIMING_NOTES = {
    "reconcile_interval": "How often each scale set is reconciled; at least 5s.",
    "backoff_first": "First skip after a refusal; doubles in a row.",
    "backoff_max": "Longest skip; at least backoff_first.",
    "hold": "How long a priority hold lasts; unset = 2 × reconcile_interval.",
    "unreachable_grace": "Runners of an unreachable provider are kept this long.",
    "left_grace": (
        "A create given up on while its machine may still be made: its name is kept this long "
        "after its provider first lists without that machine, so a machine that appears late "
        "is deleted, not adopted."
    ),
    "deadline_grace": "Machine deadline = max_age + reconcile_interval + this.",
    "delete_timeout": "Deadline of each Delete call to a provider.",
    "provider_timeout": (
        "Deadline of each List, Info, ValidateRunner and UpdateRunner call to a provider that "
        "sets no timeout of its own. A Create's deadline is what is left of its scale set's "
        "start_timeout; a Delete's is delete_timeout."
    ),
    "probe_interval": (
        "How often an unreachable provider is sent a List between passes; its answer puts it "
        "back in placement at once."
    ),
    "start_timeout": "Default start_timeout of scale sets; at least 30s.",
    "never_connected_grace": "0 = the scale set's start_timeout.",
    "stuck_after": "Busy and offline this long: stuck. 0 = the scale set's start_timeout.",
    "session_retry_max": "At least session_retry_first.",
    "crash_backoff_after": (
        "Runners of a scale set on a provider that end, or never connect within "
        "start_timeout, before they ever connect, in a row, before the scale set skips it."
    ),
    "crash_backoff_first": (
        "A scale set whose runners on a provider end, or never connect within start_timeout, "
        "before they ever connect skips it this long; doubles in a row."
    ),
    "crash_backoff_max": "Longest such skip; at least crash_backoff_first.",
    "starting_sync_interval": (
        "How often starting runners are checked between passes against GitHub (through the "
        "shared runner list) and their providers' listings: a runner is seen idle, and its "
        "boot timed, soon after it connects; one whose machine stopped before it connected "
        "ends then."
    ),
    "stale_statistics_after": (
        "GitHub's assigned count stays above the jobs it sent while runners of the scale set "
        "stay idle this long: the jobs those idle runners disprove are not counted until "
        "GitHub's count comes down."
    ),
    "lease_duration": (
        "Two daemons of one installation (active and standby): the active one acts for this "
        "long after GitHub last confirmed its lead scale set's message session, and stops "
        "acting when it runs out (cut off from GitHub). Longer than lease_renew_interval."
    ),
    "lease_renew_interval": "How often the active daemon has GitHub confirm its lease.",
    "standby_retry": (
        "How often a standby daemon asks GitHub for the lead scale set's message session; it "
        "takes over once GitHub frees it."
    ),
    "rerun_memory": (
        "rerun_lost_jobs: how long the state database remembers a job lost with its machine, "
        "and a job re-run (so a restart never re-runs it twice); GitHub re-runs a run for "
        "30 days."
    ),
}


def timing_obj() -> Obj:
    """Every field of :class:`Timing`, so a field the model gains is configurable at once."""
    defaults = Timing()
    fields = []
    for f in dataclasses.fields(Timing):
        minimum, above = TIMING_MINIMUMS.get(f.name, (0.0, False))
        nullable = getattr(defaults, f.name) is None
        note = TIMING_NOTES.get(f.name, "Duration.")
        default = getattr(defaults, f.name)
        # A count among the durations (crash_backoff_after): a whole number, at least 1.
        kind = Int(1, 100) if isinstance(default, int) else Duration(minimum, above, nullable)
        fields.append(Field(f.name, kind, note, default=default))
    return Obj(tuple(fields))


LISTEN = Str(
    pattern=r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]*):\d{1,5}$",
    hint="host:port such as 127.0.0.1:8180, [::1]:8180 or :8180",
)
DASHBOARD = Obj(
    (
        Field(
            "listen",
            LISTEN,
            "Where the fleet page is served; unset or empty = no fleet page. Loopback is plain "
            "HTTP; any other address needs tls (cert_file and key_file) and token_file or "
            "tls.client_ca_file. Read at start.",
        ),
        Field(
            "tls",
            Obj(
                (
                    Field("cert_file", TEXT, "Server certificate (with key_file)."),
                    Field("key_file", TEXT, "Server key (with cert_file)."),
                    Field(
                        "client_ca_file",
                        TEXT,
                        "CA bundle; when set, a client must show a certificate it signed.",
                    ),
                )
            ),
            "HTTPS for the fleet page. Relative files are relative to this file's folder.",
        ),
        Field(
            "token_file",
            TEXT,
            "File holding the token a client must send (Authorization: Bearer, or ?token= once "
            "in the page's address); relative to this file's folder.",
        ),
        Field(
            "refresh",
            Duration(0.1),
            "How often the live view (statuses, runners, events) is brought up to date.",
            default=2.0,
        ),
        Field(
            "history", Duration(60.0), "How far back runners over time are kept.", default=3600.0
        ),
        Field("max_connections", Int(1, 65536), "Connections served at once.", default=64),
        Field("max_streams", Int(1, 1024), "Live views open at once.", default=16),
    )
)
USAGE = Obj(
    (
        Field(
            "retention",
            Duration(3600.0),
            "Jobs served are kept in the state database this long, for `rungar usage`.",
            default=7776000.0,
        ),
    )
)

JOB_REASONS = Obj(
    (
        Field(
            "enabled",
            Bool(),
            "Tell a job's developer on GitHub why it waits: a check run (a GitHub App with "
            "Checks: write) or a commit status (a token with commit statuses: write) on its "
            'workflow run\'s head commit (docs/github.md, "Why a job waits, on GitHub").',
            default=False,
        ),
        Field(
            "after",
            Duration(0.0, above_minimum=True),
            "A job assigned to a scale set and not started this long gets its reason written; "
            "nothing is written for a job that starts sooner.",
            default=60.0,
        ),
        Field(
            "update_every",
            Duration(0.0, above_minimum=True),
            "A waiting job's reason is rewritten at most this often, and only when it changed.",
            default=60.0,
        ),
        Field(
            "rest_share",
            Int(1, 50),
            "Percent of GitHub's hourly REST budget these writes may spend; past it they wait.",
            default=5,
        ),
        Field(
            "burst_share",
            Int(1, 100),
            "Percent of that hourly share the writes may spend within any burst_window, which "
            "keeps them under GitHub's secondary limits on writes.",
            default=10,
        ),
        Field(
            "burst_window",
            Duration(0.0, above_minimum=True),
            "The window burst_share is counted over.",
            default=60.0,
        ),
        Field(
            "turn_every",
            Duration(0.0, above_minimum=True, nullable=True),
            "How often the writes are planned; unset = a quarter of the shorter of after and "
            "update_every, within 0.25 s and 5 s.",
        ),
        Field(
            "fleet_url",
            Str(pattern=r"^https?://\S+$", hint="an http(s) address"),
            "The fleet page's address as a developer reaches it, linked from each reason; "
            "unset = no link.",
        ),
    )
)


def file_obj() -> Obj:
    return Obj(
        (
            Field("version", Int(1, 1), "Format version; only 1.", default=1),
            Field("providers", ListOf(provider_obj(None), min_items=1), "Providers.", True),
            Field("scale_sets", ListOf(SCALE_SET, min_items=1), "Scale sets.", True),
            Field(
                "timing", timing_obj(), "Every duration Rungar waits, with its default.", default={}
            ),
            Field("dashboard", DASHBOARD, "The fleet page; unset = none.", default={}),
            Field("usage", USAGE, "Per-repository accounting of the jobs served.", default={}),
            Field(
                "job_reasons",
                JOB_REASONS,
                "Why a job waits, told on GitHub; unset = off.",
                default={},
            ),
        ),
        free_prefix="x-",
    )


def _render(t: Type) -> dict[str, Any]:
    if isinstance(t, Str):
        out: dict[str, Any] = {"type": "string", "minLength": 1}
        if t.pattern:
            out["pattern"] = t.pattern
        if t.max_length is not None:
            out["maxLength"] = t.max_length
        return out
    if isinstance(t, Int):
        out = {"type": "integer"}
        if t.minimum is not None:
            out["minimum"] = t.minimum
        if t.maximum is not None:
            out["maximum"] = t.maximum
        return out
    if isinstance(t, PositiveNumber):
        return {"type": "number", "exclusiveMinimum": 0}
    if isinstance(t, Bool):
        return {"type": "boolean"}
    if isinstance(t, Duration):
        number: dict[str, Any] = {"type": "number"}
        number["exclusiveMinimum" if t.above_minimum else "minimum"] = t.minimum
        options = [number, {"type": "string", "pattern": DURATION_PATTERN}]
        if t.nullable:
            options.append({"type": "null"})
        return {"anyOf": options}
    if isinstance(t, Size):
        return {
            "anyOf": [
                {"type": "integer", "minimum": 0},
                {"type": "string", "pattern": SIZE_PATTERN},
            ]
        }
    if isinstance(t, Enum):
        return {"enum": list(t.values)}
    if isinstance(t, ListOf):
        out = {"type": "array", "items": _render(t.item)}
        if t.min_items:
            out["minItems"] = t.min_items
        if t.unique:
            out["uniqueItems"] = True
        return out
    if isinstance(t, AnyMapping):
        return {"type": "object"}
    if isinstance(t, NameOrObj):
        return {"oneOf": [_render(t.name), _render(t.obj)]}
    return _render_obj(t)


def _render_obj(obj: Obj) -> dict[str, Any]:
    properties = {}
    for f in obj.fields:
        prop = {"description": f.description, **_render(f.type)}
        if f.default is not None and not f.required:
            prop["default"] = f.default
        properties[f.name] = prop
    out: dict[str, Any] = {"type": "object", "properties": properties}
    required = [f.name for f in obj.fields if f.required]
    if required:
        out["required"] = required
    if obj.free_prefix:
        out["patternProperties"] = {"^" + obj.free_prefix: {}}
    out["additionalProperties"] = obj.extra
    return out


def json_schema() -> dict[str, Any]:
    """JSON Schema (2020-12) of scale_sets.yaml, rendered from the definitions above."""
    top = _render_obj(file_obj())
    provider = top["properties"]["providers"]["items"]
    # A known type accepts only its own keys; another type accepts any extra key.
    provider["additionalProperties"] = True
    provider["allOf"] = [
        {
            "if": {"properties": {"type": {"const": name}}, "required": ["type"]},
            "then": _render_obj(provider_obj(name)),
        }
        for name in PROVIDER_TYPES
    ]
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Rungar scale_sets.yaml",
        "description": (
            "Generated by rungar.config.schema.json_schema(); do not edit. Rules between keys "
            "(min_runners ≤ max_runners, max_age ≥ start_timeout, provider references, names "
            "unique ignoring case, address or command) are checked by `rungar validate`."
        ),
        **top,
    }


def render_json() -> str:
    return json.dumps(json_schema(), indent=2, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    print(render_json(), end="")
