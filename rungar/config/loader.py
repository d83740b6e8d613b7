"""Loading scale_sets.yaml into :class:`rungar.config.model.ScaleSetsFile` (docs/configuration.md).

The file is read safely (:mod:`rungar.config.yaml_safe`), each value is checked against the
schema (:mod:`rungar.config.schema`, :mod:`rungar.config.validate`), and then the rules between
keys are checked here: provider references, names unique (scale sets ignoring case, as GitHub
compares them), ``min_runners`` ≤ ``max_runners``, ages ≥ ``start_timeout``, backoff bounds,
floors that fit the providers' ``max_runners`` (:mod:`rungar.config.floors`).
Every problem is collected and raised together as one :class:`~rungar.errors.ConfigError`
(a :class:`~rungar.config.problems.ScaleSetsError`), never a traceback.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from typing import Any

from rungar.config.dashboard import dashboard_config, resolve_dashboard
from rungar.config.floors import floor_problems
from rungar.config.merge import merge_runner
from rungar.config.model import (
    DEFAULT_MARGIN,
    DEFAULT_TYPICAL_START,
    DEFAULT_USAGE_RETENTION,
    HoldChoice,
    JobReasonsConfig,
    Overflow,
    Placement,
    ProviderConfig,
    ScaleSetConfig,
    ScaleSetProvider,
    ScaleSetsFile,
    Schedule,
    ScheduleWindow,
    Timing,
    WarmPool,
)
from rungar.config.paths import base_of, resolve_provider
from rungar.config.problems import START, Mark, Problems, first_at, join_path
from rungar.config.schedule_text import clock_text, parse_clock, parse_days, zone_problem
from rungar.config.schema import (
    COMMON_KEYS,
    PROVIDER_TYPES,
    RUNNER_KEYS,
    Obj,
    file_obj,
    unix_path_problem,
)
from rungar.config.validate import INVALID, Checker, Item, Record, closest, seconds_text, to_plain
from rungar.config.yaml_safe import MAX_BYTES, YMap, decode, read_yaml
from rungar.model.runner_block import RunnerBlock

FAKE_TYPE = "fake"  # the scripted test provider runs in-process: no address or command
SHIPPED_TYPES = frozenset({"gcp", "aws"})  # start their shipped plugin when neither is set
HOST_TYPE = "runnerd"  # a host of its own: always reached at an address


def load_scale_sets(path: str | os.PathLike[str]) -> ScaleSetsFile:
    """Read and check the file at ``path``; raises ConfigError listing every problem."""
    name = os.fspath(path)
    problems = Problems(name)
    try:
        size = os.stat(name).st_size
        if size > MAX_BYTES:  # refused before anything is read or parsed
            problems.add(START, "", f"the file is {size} bytes; at most 1 MiB is read")
            raise problems.error()
        with open(name, "rb") as f:
            data = f.read(MAX_BYTES + 1)
    except OSError as e:
        problems.add(START, "", f"cannot be read: {e.strerror or e}")
        raise problems.error() from None
    return parse_scale_sets_bytes(data, name)


def parse_scale_sets_bytes(data: bytes, filename: str) -> ScaleSetsFile:
    """Check raw bytes (size and UTF-8 first), as :func:`load_scale_sets` does with a file."""
    problems = Problems(filename)
    text = decode(data, problems)
    if text is None:
        raise problems.error()
    return _parse(text, problems)


def parse_scale_sets(text: str, filename: str) -> ScaleSetsFile:
    """Check ``text``; ``filename`` names it in the problems' positions, and its folder is
    where relative paths in it (``unix:`` addresses, TLS and credential files) resolve."""
    return _parse(text, Problems(filename))


def _parse(text: str, problems: Problems) -> ScaleSetsFile:
    root = read_yaml(text, problems)
    if root is None:
        raise problems.error()
    checker = Checker(problems)
    top = checker.record(root, file_obj(), "")
    if not isinstance(top, Record):
        raise problems.error()
    timing = _timing(top.get("timing"), checker)
    providers, runner_blocks = _providers(top.get("providers", []), checker)
    scale_sets = _scale_sets(top.get("scale_sets", []), runner_blocks, timing, checker)
    _check_floors_fit(top.get("scale_sets", []), providers, scale_sets, checker)
    _check_runner_keys(top.get("providers", []), top.get("scale_sets", []), checker)
    dashboard = dashboard_config(top.get("dashboard"), checker)
    reasons = top.get("job_reasons")
    job_reasons = JobReasonsConfig(**reasons.values) if reasons is not None else JobReasonsConfig()
    usage = top.get("usage")
    retention = usage.get("retention", DEFAULT_USAGE_RETENTION) if usage else None
    problems.raise_if_any()
    base = base_of(problems.file)
    resolved = tuple(resolve_provider(p, base) for p in providers)
    return ScaleSetsFile(
        resolved,
        tuple(scale_sets),
        timing,
        path=problems.file,
        dashboard=resolve_dashboard(dashboard, base),
        usage_retention=retention or DEFAULT_USAGE_RETENTION,
        job_reasons=job_reasons,
    )


def _timing(record: Record | None, checker: Checker) -> Timing:
    if record is None:
        return Timing()
    for first, most in (
        ("backoff_first", "backoff_max"),
        ("session_retry_first", "session_retry_max"),
        ("crash_backoff_first", "crash_backoff_max"),
    ):
        low, high = record.get(first), record.get(most, getattr(Timing(), most))
        if low is not None and high < low:
            checker.fail(
                record.mark_of(most if record.has(most) else first),
                record.path_of(most if record.has(most) else first),
                f"{most} ({_dur(high)}) must be at least {first} ({_dur(low)})",
            )
    # The lease must be renewed before it runs out, or the active daemon would stop acting
    # between two renewals GitHub answered.
    duration = record.get("lease_duration", Timing().lease_duration)
    renew = record.get("lease_renew_interval", Timing().lease_renew_interval)
    if duration is not None and renew is not None and renew >= duration:
        key = "lease_renew_interval" if record.has("lease_renew_interval") else "lease_duration"
        checker.fail(
            record.mark_of(key),
            record.path_of(key),
            f"lease_renew_interval ({_dur(renew)}) must be shorter than lease_duration "
            f"({_dur(duration)}): the lease would run out between renewals",
        )
    return Timing(**record.values)


def _providers(
    items: list[Item], checker: Checker
) -> tuple[list[ProviderConfig], dict[str, Mapping[str, Any]]]:
    """Providers that passed, and the runner block of every provider name seen (for references)."""
    providers: list[ProviderConfig] = []
    runner_blocks: dict[str, Mapping[str, Any]] = {}
    first_seen: dict[str, tuple[str, Mark]] = {}  # lower-case name -> (name, where)
    for item in items:
        record: Record = item.value
        name, provider_type = record.get("name"), record.get("type")
        options = _options(record, provider_type, checker)
        _check_reachability(record, provider_type, checker)
        if name is None:
            continue
        if name.lower() in first_seen:
            other, where = first_seen[name.lower()]
            same = "defined twice" if other == name else f"the same as {other} ignoring case"
            checker.fail(
                record.mark_of("name"),
                record.path_of("name"),
                f"provider {name} is {same} (first at line {where.line})",
            )
            continue
        first_seen[name.lower()] = (name, record.mark_of("name"))
        runner_blocks[name] = merge_runner(record.get("runner", {}), {})  # drops its nulls
        if provider_type is None:
            continue
        providers.append(
            ProviderConfig(
                name=name,
                type=provider_type,
                weight=float(record.get("weight", 1.0)),
                max_runners=record.get("max_runners", 0),
                disabled=record.get("disabled", False),
                runner=runner_blocks[name],
                options=options,
                address=record.get("address", ""),
                command=tuple(i.value for i in record.get("command", [])),
                timeout=record.get("timeout", 0.0),
                price_per_hour=record.get("price_per_hour"),
                overflow_after=record.get("overflow_after", 0.0),
                overflow=Overflow(record.get("overflow", Overflow.AT_ONCE.value)),
                overflow_margin=record.get("overflow_margin", DEFAULT_MARGIN),
                typical_start=record.get("typical_start", DEFAULT_TYPICAL_START),
            )
        )
    return providers, runner_blocks


def _options(record: Record, provider_type: str | None, checker: Checker) -> dict[str, Any]:
    """The type's own keys: checked for a known type, kept as written for any other."""
    own = PROVIDER_TYPES.get(provider_type or "")
    if own is None:
        return {key: to_plain(entry.value) for key, entry in record.extra.items()}
    typed = Obj(own)
    known = sorted(COMMON_KEYS) + [f.name for f in own]
    options: dict[str, Any] = {}
    for key, entry in record.extra.items():
        spec = typed.field(key)
        path = record.path_of(key)
        if spec is None:
            checker.fail(
                entry.key_mark, path, f"unknown key for type {provider_type}{_hint(key, known)}"
            )
            continue
        value = checker.check(entry.value, spec.type, path, entry.key_mark)
        if value is INVALID:
            continue
        if isinstance(value, Record):
            value = value.values
        elif isinstance(value, list):
            value = [item.value for item in value]
        options[key] = value
    for spec in own:
        if spec.required and spec.name not in record.extra:
            checker.fail(
                record.mark, record.path_of(spec.name), f"is required for type {provider_type}"
            )
    return options


def _hint(key: str, known: list[str]) -> str:
    near = closest(key, known)
    return f"; {near[2:-1]}" if near else f"; known keys are {', '.join(known)}"


def _check_reachability(record: Record, provider_type: str | None, checker: Checker) -> None:
    has_address, has_command = "address" in record.marks, "command" in record.marks
    if has_address and has_command:
        checker.fail(
            record.mark_of("command"), record.path_of("command"), "set address or command, not both"
        )
    if not has_address and not has_command:
        if provider_type == HOST_TYPE:
            checker.fail(
                record.mark,
                record.path,
                "needs an address: runnerd runs on a host of its own, reached at its "
                "unix:// socket or host:port",
            )
        elif provider_type not in SHIPPED_TYPES and provider_type != FAKE_TYPE:
            checker.fail(record.mark, record.path, "needs an address or a command")
    address = record.get("address", "")
    too_long = unix_path_problem(address)
    if too_long:
        checker.fail(record.mark_of("address"), record.path_of("address"), too_long)
    tls = record.extra.get("tls")
    if tls is not None and address.startswith("unix:"):
        checker.fail(tls.key_mark, record.path_of("tls"), "TLS is refused on a unix:// address")


def _check_runner_keys(providers: list[Item], scale_sets: list[Item], checker: Checker) -> None:
    """A runner block's keys, for a provider type whose keys Rungar knows (``RUNNER_KEYS``),
    offline: an unknown one is refused where it is written, with the closest known key. A
    type close to a known one but not it is refused too, naming it. Plugins' own types declare
    their keys through ``ValidateRunner`` at ``rungar apply`` and its ``--dry-run``."""
    types: dict[str, str] = {}
    for item in providers:
        record: Record = item.value
        name, provider_type = record.get("name"), record.get("type")
        if not isinstance(name, str) or not isinstance(provider_type, str):
            continue
        types[name] = provider_type
        if provider_type not in PROVIDER_TYPES:
            near = difflib.get_close_matches(provider_type, sorted(PROVIDER_TYPES), 1, 0.8)
            if near:
                checker.fail(
                    record.mark_of("type"),
                    record.path_of("type"),
                    f"{provider_type} is not a provider type Rungar knows; did you mean {near[0]}?",
                )
        _unknown_runner_keys(record, provider_type, checker)
    for item in scale_sets:
        record = item.value
        for ref_item in record.get("providers") or []:
            ref = ref_item.value
            if isinstance(ref, Record) and ref.get("name") in types:
                _unknown_runner_keys(ref, types[ref.get("name")], checker)


def _unknown_runner_keys(record: Record, provider_type: str, checker: Checker) -> None:
    known = RUNNER_KEYS.get(provider_type)
    node = record.nodes.get("runner")
    if known is None or not isinstance(node, YMap):
        return
    for key, entry in node.entries.items():
        if key not in known:
            near = difflib.get_close_matches(key, list(known), 1, 0.6)
            hint = f"; did you mean {near[0]}?" if near else f"; it knows {', '.join(known)}"
            checker.fail(
                entry.key_mark,
                f"{record.path_of('runner')}.{key}",
                f"not a runner key provider type {provider_type} knows{hint}",
            )


def _scale_sets(
    items: list[Item],
    runner_blocks: Mapping[str, Mapping[str, Any]],
    timing: Timing,
    checker: Checker,
) -> list[ScaleSetConfig]:
    scale_sets: list[ScaleSetConfig] = []
    first_seen: dict[str, tuple[str, Mark]] = {}
    for item in items:
        record: Record = item.value
        name = record.get("name")
        if name is not None:
            if name.lower() in first_seen:
                other, where = first_seen[name.lower()]
                same = "defined twice" if other == name else f"the same as {other} ignoring case"
                checker.fail(
                    record.mark_of("name"),
                    record.path_of("name"),
                    f"scale set {name} is {same} (line {where.line}); GitHub compares names "
                    "ignoring case",
                )
                name = None
            else:
                first_seen[name.lower()] = (name, record.mark_of("name"))
        limits_ok = _check_limits(record, checker)
        start_timeout = record.get("start_timeout", timing.start_timeout)
        ages_ok = _check_ages(record, start_timeout, checker)
        providers = _scale_set_providers(record, runner_blocks, checker)
        schedule_ok, schedule = _schedule(record, checker)
        warm_ok, warm_pool = _warm_pool(record, checker)
        if limits_ok and warm_pool is not None:
            warm_ok = _check_floors(record, warm_pool.max, checker) and warm_ok
        if (
            name is None
            or not limits_ok
            or not ages_ok
            or providers is None
            or not schedule_ok
            or not warm_ok
        ):
            continue
        scale_sets.append(
            ScaleSetConfig(
                name=name,
                max_runners=record.get("max_runners"),
                providers=providers,
                labels=tuple(i.value for i in record.get("labels", [])),
                runner_group=record.get("runner_group", "Default"),
                min_runners=record.get("min_runners", 0),
                priority=record.get("priority", 0),
                hold=HoldChoice(record.get("hold", HoldChoice.EVERY_FULL.value)),
                hold_margin=record.get("hold_margin", 0.0),
                placement=Placement(record.get("placement", Placement.SPREAD.value)),
                start_timeout=start_timeout,
                max_idle_age=record.get("max_idle_age"),
                max_age=record.get("max_age"),
                paused=record.get("paused", False),
                schedule=schedule,
                warm_pool=warm_pool,
                rerun_lost_jobs=record.get("rerun_lost_jobs", False),
                unservable_cancel_after=_cancel_after(record.get("unservable")),
            )
        )
    return scale_sets


def _cancel_after(unservable: Record | None) -> float | None:
    return unservable.get("cancel_after") if unservable is not None else None


def _schedule(record: Record, checker: Checker) -> tuple[bool, Schedule | None]:
    """Whether the schedule is valid (its problems added if not), and the schedule or None."""
    if "schedule" not in record.marks:
        return True, None
    found = record.get("schedule")
    if not isinstance(found, Record):
        return False, None
    ok = True
    timezone = found.get("timezone", "UTC")
    if "timezone" in found.marks:
        if "timezone" not in found.values:
            ok = False
        else:
            why = zone_problem(timezone)
            if why is not None:
                checker.fail(found.mark_of("timezone"), found.path_of("timezone"), why)
                ok = False
    most = record.get("max_runners")
    windows: list[ScheduleWindow] = []
    for item in found.get("windows", []):
        window = _window(item.value, most, checker)
        if window is None:
            ok = False
        else:
            windows.append(window)
    if "windows" not in found.values or not ok:
        return False, None
    return True, Schedule(timezone=timezone, windows=tuple(windows))


def _warm_pool(record: Record, checker: Checker) -> tuple[bool, WarmPool | None]:
    """Whether the warm pool is valid (its problems added if not), and the pool or None."""
    if "warm_pool" not in record.marks:
        return True, None
    found = record.get("warm_pool")
    if not isinstance(found, Record) or "max" not in found.values:
        return False, None
    ok = True
    most, ceiling = found.get("max"), record.get("max_runners")
    if ceiling is not None and most > ceiling:
        checker.fail(
            found.mark_of("max"),
            found.path_of("max"),
            f"is {most}; at most max_runners ({ceiling})",
        )
        ok = False
    slot = found.get("slot", 900.0)
    if "slot" in found.marks and "slot" in found.values and (slot % 60 or 86400 % slot):
        checker.fail(
            found.mark_of("slot"),
            found.path_of("slot"),
            f"is {_dur(slot)}; a day must divide into whole slots of whole minutes "
            "(such as 5m, 15m, 30m or 1h)",
        )
        ok = False
    zone = found.get("timezone", "")
    if "timezone" in found.marks:
        why = zone_problem(zone) if "timezone" in found.values else "is not a timezone"
        if why is not None:
            checker.fail(found.mark_of("timezone"), found.path_of("timezone"), why)
            ok = False
    if not ok or any(key in found.marks and key not in found.values for key in found.marks):
        return False, None
    return True, WarmPool(
        max=most,
        slot=float(slot),
        lookback=found.get("lookback", 5),
        percentile=found.get("percentile", 90),
        ahead=float(found.get("ahead", 300.0)),
        timezone=zone,
    )


def _window(record: Record, most: int | None, checker: Checker) -> ScheduleWindow | None:
    """One window, or None after adding its problems (every one of them)."""
    ok = all(key in record.values for key in ("days", "from", "to"))
    days = parse_days(record.get("days", "mon"))
    if isinstance(days, str):
        checker.fail(record.mark_of("days"), record.path_of("days"), days)
        ok = False
    start = parse_clock(record.get("from", "00:00"), allow_24=False)
    if isinstance(start, str):
        checker.fail(record.mark_of("from"), record.path_of("from"), start)
        ok = False
    end = parse_clock(record.get("to", "24:00"), allow_24=True)
    if isinstance(end, str):
        checker.fail(record.mark_of("to"), record.path_of("to"), end)
        ok = False
    if isinstance(start, int) and isinstance(end, int) and start == end and ok:
        checker.fail(
            record.mark_of("to"),
            record.path_of("to"),
            f"equals from ({clock_text(start)}); a window needs a length (to before from runs "
            "past midnight)",
        )
        ok = False
    low = record.get("min_runners", 0)
    if most is not None and low > most:
        checker.fail(
            record.mark_of("min_runners"),
            record.path_of("min_runners"),
            f"is {low}; at most max_runners ({most})",
        )
        ok = False
    if not ok or isinstance(days, str) or isinstance(start, str) or isinstance(end, str):
        return None
    text = f"{record.get('days')} {clock_text(start)}-{clock_text(end)}"
    return ScheduleWindow(days=days, start=start, end=end, min_runners=low, text=text)


def _check_floors(record: Record, warm: int, checker: Checker) -> bool:
    """Every floor fits under ``max_runners``: ``min_runners`` plus the warm pool's ``max``,
    and each schedule window's ``min_runners`` plus it (the warm pool's runners come on top of
    the floor in force, so a floor that cannot fit would never be kept)."""
    high = record.get("max_runners")
    ok = True
    low = record.get("min_runners", 0)
    pool = record.get("warm_pool")
    if low + warm > high:
        where = pool if isinstance(pool, Record) else record
        checker.fail(
            where.mark_of("max"),
            where.path_of("max"),
            f"is {warm}; min_runners ({low}) + warm_pool.max ({warm}) = {low + warm} is more "
            f"than max_runners ({high})",
        )
        ok = False
    schedule = record.get("schedule")
    if not isinstance(schedule, Record):
        return ok
    for item in schedule.get("windows", []):
        window = item.value
        if not isinstance(window, Record):
            continue
        low = window.get("min_runners", 0)
        if low + warm > high:
            key = "min_runners" if "min_runners" in window.marks else "days"
            checker.fail(
                window.mark_of(key),
                window.path_of(key),
                f"is {low}; this window's min_runners ({low}) + warm_pool.max ({warm}) = "
                f"{low + warm} is more than max_runners ({high})",
            )
            ok = False
    return ok


def _check_floors_fit(
    items: list[Item],
    providers: list[ProviderConfig],
    scale_sets: list[ScaleSetConfig],
    checker: Checker,
) -> None:
    """Each floor that its providers' ``max_runners`` cannot hold, alone or beside the other
    scale sets sharing them, reported at the floor's key."""
    records: dict[str, Record] = {}
    for item in items:
        record = item.value
        if isinstance(record, Record) and isinstance(record.get("name"), str):
            records.setdefault(record.get("name"), record)
    for problem in floor_problems(providers, scale_sets):
        record = records[problem.scale_set]
        if problem.key != "min_runners":  # schedule.windows[N].min_runners
            index = int(problem.key.split("[")[1].split("]")[0])
            record = record.get("schedule").get("windows")[index].value
        checker.fail(record.mark_of("min_runners"), record.path_of("min_runners"), problem.message)


def _check_limits(record: Record, checker: Checker) -> bool:
    high = record.get("max_runners")
    low = record.get("min_runners", 0)
    if high is None:
        return False
    if low > high:
        checker.fail(
            record.mark_of("min_runners"),
            record.path_of("min_runners"),
            f"is {low}; at most max_runners ({high})",
        )
        return False
    return True


def _check_ages(record: Record, start_timeout: float, checker: Checker) -> bool:
    ok = True
    for key in ("max_idle_age", "max_age"):
        age = record.get(key)
        if age is not None and age < start_timeout:
            checker.fail(
                record.mark_of(key),
                record.path_of(key),
                f"is {_dur(age)}; at least start_timeout ({_dur(start_timeout)})",
            )
            ok = False
    return ok


def _scale_set_providers(
    record: Record,
    runner_blocks: Mapping[str, Mapping[str, Any]],
    checker: Checker,
) -> tuple[ScaleSetProvider, ...] | None:
    """The scale set's providers with merged runner blocks; None when any is wrong."""
    if not record.has("providers"):
        return None
    out: list[ScaleSetProvider] = []
    listed: dict[str, Mark] = {}
    ok = True
    for item in record.get("providers"):
        ref: Record = item.value
        path = join_path(record.path_of("providers"), item.index)
        name = ref.get("name")
        if name is None:
            ok = False
            continue
        where = ref.mark_of("name")
        if name in listed:
            checker.fail(
                where,
                path,
                f"provider {name} is listed twice (first at {first_at(listed[name], where)})",
            )
            ok = False
            continue
        listed[name] = where
        if name not in runner_blocks:
            near = closest(name, list(runner_blocks))
            checker.fail(where, path, f"no provider named {name}{near}")
            ok = False
            continue
        merged = merge_runner(runner_blocks[name], ref.get("runner", {}))
        try:
            RunnerBlock.from_mapping(merged)
        except ValueError as e:
            key, _, why = str(e).partition(": ")
            checker.fail(
                ref.mark_of("runner") if ref.has("runner") else where, f"{path}.runner.{key}", why
            )
            ok = False
            continue
        out.append(ScaleSetProvider(name, merged))
    return tuple(out) if ok else None


def _dur(seconds: float) -> str:
    return seconds_text(seconds)
