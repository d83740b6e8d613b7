"""What Rungar says to people, worded once: skip reasons, status notes and lines, event messages and
the sentences of log lines (docs/troubleshooting.md, "Status"; docs/events.md).

A skip reason, a ``rungar status`` line, the ``message`` of an event and the log line of the same
moment say the same thing in the same words: a provider that refused ``FULL`` is "found full"
everywhere, a provider that did not answer is "unreachable", a hold is "held for scale set S".
"Hold" means a priority hold and nothing else: a message session *owns* its scale set, a
rate limit *pauses* calls. The README quotes these sentences; change them there too.
"""

from __future__ import annotations

from collections.abc import Iterable

from rungar.model.units import format_duration

# ---------------------------------------------------------------- skip reasons
# Why placement will not try a provider now, in the order it checks them
# (docs/troubleshooting.md, "Status").

DISABLED = "disabled"
UNREACHABLE = "unreachable"
FULL = "full"
# How a crash loop's runners ended (docs/troubleshooting.md, "Status": skip lines)
EXITED = "exit before connecting"
NEVER_CONNECTED = "never connect within start_timeout"


def failing_reason(error: str) -> str:
    return f"failing to create its runner: {error}"


def crash_reason(why: str, in_a_row: int) -> str:
    """``its runners exit before connecting (3 in a row)``; ``why`` is EXITED or
    NEVER_CONNECTED."""
    return f"its runners {why} ({in_a_row} in a row)"


def held_reason(holder: str) -> str:
    return f"held for scale set {holder}"


def kept_for_reason(scale_set: str) -> str:
    return f"kept for the assigned jobs of scale set {scale_set}"


def overflow_reason(after: float) -> str:
    return f"taken only after {format_duration(after)} waiting for room elsewhere"


def waits_for_host_reason(host: str, left: float) -> str:
    """A priced provider with ``overflow: when_host_is_later`` skipped while a host expects
    room sooner than it would start the runner (docs/placement.md)."""
    return f"waits for {host}: room expected in {format_duration(left)}"


def waits_for_host(scale_set: str, provider: str, host: str, left: float) -> str:
    """``rungar status``'s line, the event and the log of a runner waiting for a host's
    expected room rather than going to a priced provider."""
    return f"{scale_set}'s runner is not sent to {provider}: " + waits_for_host_reason(host, left)


def below_minimum_reason(version: object, minimum: object) -> str:
    """A provider whose runner GitHub would refuse (docs/github.md, "Runner versions")."""
    return f"runner {version} is below GitHub's minimum {minimum}"


def refused_reason(version: object) -> str:
    """A provider whose runner GitHub refused as outdated when it connected (its exit said so),
    until the provider reports a newer runner."""
    return f"runner {version} was refused by GitHub as outdated"


def runner_deadline(
    provider: str, version: object, latest: object, released: str, stops_on: str, left: float
) -> str:
    """A provider whose runner has not caught up with GitHub's latest release, ``left`` seconds
    before GitHub stops queueing jobs to it (none left: it has)."""
    said = f"{provider} runs runner {version}; the latest is {latest} (released {released}): "
    if left <= 0:
        return said + f"GitHub stopped queueing jobs to it on {stops_on}"
    return said + f"GitHub stops queueing jobs to it on {stops_on} (in {format_duration(left)})"


def runner_deadline_fix(provider: str, latest: object) -> str:
    """What to do of :func:`runner_deadline`: what GitHub wants installed, and where."""
    return (
        f"install runner {latest} on {provider}'s machines (its runner install or image), then "
        "tell it there (runnerd reads its install; a runner block's runner_version)"
    )


def outdated_exit(runner: str, version: object) -> str:
    """A runner that exited because GitHub refused its version: told as such, never a crash."""
    return f"runner {runner} exited: GitHub refused runner {version} as outdated (not a crash)"


def outdated_sentence(scale_set: str, provider: str, reason: str) -> str:
    """``rungar status``'s line of a provider skipped for its runner version."""
    return f"{scale_set}'s runners are not placed on {provider}: {reason}"


def limit_reason(limit: int) -> str:
    return f"at its limit of {limit} runners"


# A scale set removed from the configuration while one of its creates was on its way: it
# places nothing more.
SCALE_SET_GONE = "the scale set is no longer configured"


def scale_set_limit_reason(limit: int) -> str:
    return f"the scale set is at its limit of {limit} runners"


def nothing_to_try(skips: Iterable[object]) -> str:
    """The line logged and recorded when no provider takes a runner: every skip, in order."""
    return "no provider can be tried: " + "; ".join(str(s) for s in skips)


# ---------------------------------------------------------------- a provider that refused


def found_full(scale_set: str, provider: str, left: float) -> str:
    """``rungar-c4-m8 found compute1 full; tries it again in 47s``: the skip line of
    ``rungar status``, and with the provider's own message, the event's and the log's."""
    return f"{scale_set} found {provider} full; tries it again in {format_duration(left)}"


def found_failing(scale_set: str, provider: str, in_a_row: int, left: float, error: str) -> str:
    """``rungar-gpu found compute3 failing (2 in a row); tries it again in 30s: connection
    reset``: a FAILED or INVALID refusal, or a create that failed."""
    return (
        f"{scale_set} found {provider} failing ({in_a_row} in a row); "
        f"tries it again in {format_duration(left)}: {error}"
    )


def skip_sentence(
    scale_set: str, provider: str, full: bool, refusals: int, left: float, error: str
) -> str:
    """One skip line of ``rungar status``: :func:`found_full` or :func:`found_failing`."""
    if full:
        return found_full(scale_set, provider, left)
    return found_failing(scale_set, provider, refusals, left, error)


def refused(scale_set: str, provider: str, full: bool, refusals: int, left: float, why: str) -> str:
    """A refusal as it happens (the event's message and the log line): the skip line it
    starts, and for FULL the provider's own words after it."""
    if full:
        return found_full(scale_set, provider, left) + (f": {why}" if why else "")
    return found_failing(scale_set, provider, refusals, left, why)


def crash_sentence(scale_set: str, provider: str, why: str, runners: int, left: float) -> str:
    """``rungar-c4-m8's runners on compute1 exit before connecting (3 in a row); next try
    in 2m``."""
    return (
        f"{scale_set}'s runners on {provider} {why} ({runners} in a row); "
        f"next try in {format_duration(left)}"
    )


# ---------------------------------------------------------------- a provider that did not answer

UNREACHABLE_SINCE = "provider is unreachable; nothing is placed on it until it lists again"
REACHABLE_AGAIN = "provider is reachable again"
WRITTEN_OFF = "forgetting runner on a provider unreachable for too long; its machine is left alone"
CRASH_LOOP = "runners exit before connecting; backing off the provider"


def cannot_be_reached(provider: str, why: str) -> str:
    """The line under ``rungar status``'s providers for each unreachable one."""
    return f"{provider} cannot be reached" + (f": {why}" if why else "")


def kept_while_unreachable(provider: str, kept: int, written_off_in: float | None) -> str:
    """``compute3's 2 runners still count against the limits until it answers; written off in
    4m unless it does``."""
    runners = f"{kept} runner" if kept == 1 else f"{kept} runners"
    verb = "counts" if kept == 1 else "count"
    text = f"{provider}'s {runners} still {verb} against the limits until it answers"
    if written_off_in is not None:
        off_in = (
            f"{max(0, int(written_off_in))}s"
            if written_off_in < 60
            else format_duration(written_off_in)
        )
        text += f"; written off in {off_in} unless it does"
    return text


def refuses_as_invalid(provider: str, error: str) -> str:
    """``host2 refuses its runner as invalid: 8 vCPUs is more than the host's 4 CPUs``: a
    provider where the runner fits nowhere, whatever room it has."""
    return f"{provider} refuses its runner as invalid" + (f": {error}" if error else "")


def unservable(scale_set: str, why: Iterable[str], after: float) -> str:
    """Why a job's run was cancelled: no provider of its scale set can ever take its runner."""
    return (
        f"no provider of {scale_set} can take its runner ({'; '.join(why)}); "
        f"its run was cancelled after {format_duration(after)} waiting"
    )


# ---------------------------------------------------------------- priority holds


def hold_text(holder: str, priority: int) -> str:
    """``for rungar-c8-m16 (priority 10), renewed while it asks``: a provider's hold, as
    ``status`` and ``providers inspect`` show it. No time left is shown: the holder renews the
    hold at each reconcile pass, so a count down would read as frozen."""
    return f"for {holder} (priority {priority}), renewed while it asks"


def held_status(holder: str, priority: int) -> str:
    """A held provider's STATUS: ``HELD for S (priority P), renewed while it asks``."""
    return f"HELD {hold_text(holder, priority)}"


def hold_placed(holder: str, priority: int) -> str:
    """The ``held`` event's message, when a hold is placed."""
    return (
        f"{held_reason(holder)} (priority {priority}): lower priorities keep off it until it "
        "places its runner"
    )


def holding_back(provider: str, holder: str) -> str:
    """The note of a scale set a hold keeps off a provider (STATUS ``HOLDING BACK``)."""
    return (
        f'holding back from {provider} for scale set "{holder}", '
        "which is waiting for room and takes priority"
    )


# ---------------------------------------------------------------- a scale set's notes

WAITING_NOTE = "another message session owns the scale set; standing by until it ends"
UNREACHABLE_NOTE = "GitHub does not answer; trying again for the message session"
STARTING_NOTE = "being looked up on GitHub, and its runners adopted"
# a standby daemon's scale sets other than the lead (docs/operating.md, "Running a standby")
LEAD_NOTE = "standing by until this daemon holds the lead scale set's message session"


def paused_note(runners_left: int) -> str:
    return (
        f"taking no jobs, which wait on GitHub; {runners_left} runners left; "
        "until resumed or the daemon restarts"
    )


# ---------------------------------------------------------------- a name that is not there


CLOSE_ENOUGH = 0.6


def no_such_name(kind: str, name: str, known: Iterable[str]) -> str:
    """``no scale set named demo-lrage; did you mean demo-large?``, or with nothing close, the
    names there are (a few): a mistyped name is told what it was meant to be."""
    import difflib

    names = sorted(set(known))
    scored = [(difflib.SequenceMatcher(None, name, n).ratio(), n) for n in names]
    best = max((score for score, _ in scored), default=0.0)
    if best >= CLOSE_ENOUGH:  # difflib's own cutoff; a tie goes to the first in order
        close = next(n for score, n in scored if score == best)
        return f"no {kind} named {name}; did you mean {close}?"
    if not names:
        return f"no {kind} named {name}"
    shown = ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")
    return f"no {kind} named {name} (known: {shown})"
