"""Admit or refuse, one test per rule of docs/admission.md, built from its own numbers."""

from __future__ import annotations

from dataclasses import replace

from runnerd.admission import host as hostguard
from runnerd.admission.admit import (
    cpu_line,
    decide,
)
from runnerd.admission.model import (
    AdmissionRecord,
    Admit,
    Candidate,
    CpuWaiter,
    Decided,
    GuardState,
    Holder,
    HostReading,
    Limits,
    NoRoom,
    Policy,
    Prediction,
    Running,
    SliceReading,
)

G = 1024**3
M = 1024**2
NOW = 1_000_000.0
CAPS = Limits(policy=Policy.CAPS, memory_max=33 * G)
MEASURED = Limits(policy=Policy.MEASURED, memory_max=33 * G)
FRESH_SLICE = SliceReading(NOW - 1, 10 * G)


def candidate(
    cap: float = 7,
    predicted: float = 2,
    cpus: float = 8,
    cpu: float = 1.0,
    slots: int = 8,
    **kw: object,
) -> Candidate:
    fields: dict[str, object] = {
        "name": "r-new",
        "profile": "node",
        "scale_set": "node-set",
        "cap": int(cap * G),
        "cpus": cpus,
        "disk": 0,
        "slots": slots,
        "prediction": Prediction(
            int(predicted * G), cpu, "the p95 peak of its job's last 20 runs + the margin"
        ),
    }
    fields.update(kw)
    # why the ignore[arg-type] below: fields holds each field's typed value by name
    return Candidate(**fields)  # type: ignore[arg-type]


def runner(
    n: int,
    cap: float = 7,
    reserved: float = 2,
    used: float = 0,
    used_at: float = NOW - 1,
    **kw: object,
) -> Running:
    fields: dict[str, object] = {
        "name": f"r{n}",
        "profile": "node",
        "scale_set": "node-set",
        "cap": int(cap * G),
        "cpus": 8.0,
        "reserved": int(reserved * G),
        "reserved_cpu": 1.0,
        "used": int(used * G),
        "used_at": used_at,
    }
    fields.update(kw)
    # why the ignore[arg-type] below: fields holds each field's typed value by name
    return Running(**fields)  # type: ignore[arg-type]


def run(
    cand: Candidate,
    running: list[Running],
    limits: Limits = CAPS,
    slice_reading: SliceReading | None = FRESH_SLICE,
    host: HostReading | None = None,
    disk: int | None = None,
    state: GuardState | None = None,
    now: float = NOW,
) -> Decided:
    return decide(cand, running, slice_reading, host, disk, limits, state or GuardState(), now)


def refusal(outcome: Decided) -> NoRoom:
    assert isinstance(outcome.decision, NoRoom), outcome.decision
    return outcome.decision


def admitted(outcome: Decided) -> Admit:
    assert isinstance(outcome.decision, Admit), outcome.decision
    return outcome.decision


# ---- caps -----------------------------------------------------------------------------------


def test_under_caps_a_runner_reserves_its_memory_beside_the_caps_of_everything_running() -> None:
    four = [runner(i) for i in range(4)]  # 4 × 7G = 28G of 33G
    refused = refusal(run(candidate(), four))
    assert refused.resource == "memory"
    assert (
        refused.message == "The slice is short of memory: needs 7G; 5G of its 33G MemoryMax is free"
    )
    ok = admitted(run(candidate(cap=5), four))
    assert ok.memory == 5 * G
    assert (
        ok.record.line()
        == "admitted by caps: reserved 5G, its profile's memory; 5G of the budget was free"
    )


def test_the_mirror_counts_in_the_budget() -> None:
    limits = replace(CAPS, mirror=1 * G)
    assert (
        refusal(run(candidate(cap=5), [runner(i) for i in range(4)], limits)).resource == "memory"
    )


def test_a_profile_whose_slots_are_all_busy_is_refused_for_slots() -> None:
    refused = refusal(run(candidate(slots=2), [runner(1), runner(2)]))
    assert (refused.resource, refused.message) == ("slots", "All 2 slots of profile node are busy")


def test_a_profile_of_one_slot_says_its_one_slot_is_busy() -> None:
    refused = refusal(run(candidate(slots=1), [runner(1)]))
    assert refused.message == "The one slot of profile node is busy"


def test_other_profiles_do_not_take_a_profiles_slots() -> None:
    admitted(run(candidate(cap=1, slots=1), [runner(1, cap=1, profile="jvm")]))


# ---- measured -------------------------------------------------------------------------------


def test_under_measured_a_runner_reserves_its_prediction() -> None:
    ok = admitted(run(candidate(), [runner(i) for i in range(4)], MEASURED))
    assert ok.memory == 2 * G
    assert ok.record.free == 33 * G - 4 * 2 * G


def test_a_running_runner_counts_at_the_larger_of_what_it_reserved_and_what_it_last_used() -> None:
    busy = [runner(i, reserved=2, used=7) for i in range(4)]  # each went to 7G: 28G counted
    refused = refusal(run(candidate(predicted=6), busy, MEASURED))
    assert "needs 6G; 5G of its 33G MemoryMax is free" in refused.message


def test_a_running_runner_without_a_recent_sample_counts_at_its_cap() -> None:
    stale = [runner(i, reserved=2, used=1, used_at=NOW - 60) for i in range(4)]
    assert refusal(run(candidate(predicted=6), stale, MEASURED)).resource == "memory"
    fresh = [runner(i, reserved=2, used=1) for i in range(4)]
    admitted(run(candidate(predicted=6), fresh, MEASURED))


def test_without_a_recent_slice_sample_every_runner_reserves_its_cap() -> None:
    stale = SliceReading(NOW - 60, 10 * G)
    ok = admitted(run(candidate(), [], MEASURED, slice_reading=stale))
    assert ok.memory == 7 * G
    assert ok.record.basis == "its cap, as no sample of the slice is recent"


def test_switching_back_to_caps_counts_every_running_runner_at_its_cap() -> None:
    running = [runner(i, reserved=2, used=1) for i in range(4)]
    assert refusal(run(candidate(predicted=6, cap=6), running, CAPS)).resource == "memory"


def test_nothing_starts_while_the_slice_uses_ninety_percent_of_memory_max() -> None:
    at_mark = SliceReading(NOW - 1, int(29.7 * G))
    refused = refusal(run(candidate(), [], MEASURED, slice_reading=at_mark))
    assert refused.message == (
        "The slice uses 90% of its MemoryMax (29.7G of 33G); nothing starts at 90% or more"
    )
    admitted(run(candidate(), [], MEASURED, slice_reading=SliceReading(NOW - 1, int(29.6 * G))))


def test_the_admission_record_reads_as_a_sentence() -> None:
    record = AdmissionRecord(
        Policy.MEASURED, 1280 * M, "the p95 peak of its job's last 10 runs + the margin", 10 * G
    )
    assert record.line() == (
        "admitted by measured peaks: reserved 1.25G, the p95 peak of its job's last 10 runs + "
        "the margin; 10G of the budget was free"
    )


# ---- the host guard -------------------------------------------------------------------------


def host(
    total: float = 64, available: float = 31, held: float = 13, full: float = 0.0, **kw: object
) -> HostReading:
    # why the ignore[arg-type] below: kw forwards HostReading's typed fields
    return HostReading(NOW - 1, int(total * G), int(available * G), full, int(held * G), **kw)  # type: ignore[arg-type]


def test_the_host_margin_is_the_larger_of_2G_and_a_sixteenth_of_the_hosts_memory() -> None:
    limits = Limits()
    assert [hostguard.margin(t * G, limits) // G for t in (16, 32, 64, 128, 256)] == [
        2,
        2,
        4,
        8,
        16,
    ]


def test_the_host_line_says_what_the_host_leaves_the_slice() -> None:
    line = hostguard.host_line(host(), replace(CAPS, memory_max=None), reserved=28 * G)
    assert line == "host: 31G of 64G available; leaves the slice 40G, so 12G is free"
    assert hostguard.host_line(host(), replace(CAPS, memory_max=33 * G), 0) == (
        "host: 31G of 64G available; leaves the slice 40G"
    )


def test_a_runner_starts_only_when_it_fits_what_the_host_leaves_beside_the_running_ones() -> None:
    # MemoryMax 33G, the host leaves 30G, running reservations 26.25G: 3.75G is free.
    reading = host(total=64, available=24, held=10)  # 10 + 24 − 4 = 30G
    running = [runner(i, cap=5.25) for i in range(5)]
    line = hostguard.host_line(reading, CAPS, reserved=int(26.25 * G))
    assert line == "host: 24G of 64G available; leaves the slice 30G of its 33G, so 3.75G is free"
    assert refusal(run(candidate(cap=4), running, host=reading)).resource == "memory"
    admitted(run(candidate(cap=3.5), running, host=reading))


def test_a_host_wait_names_the_largest_programs_outside_ci() -> None:
    holders = (Holder("java", int(9.3 * G)), Holder("qemu-system-x86", int(5.8 * G)))
    reading = host(total=64, available=14, held=20, holders=holders)
    running = [runner(i, cap=7) for i in range(4)]  # 28G reserved, 34 − 4 − 28 = 2G spare
    refused = refusal(run(candidate(cap=6), running, replace(CAPS, memory_max=None), host=reading))
    assert refused.message == (
        "The host is short of memory: needs 6G; the host has 2G to spare; programs outside CI "
        "hold 30G, most java 9.3G and qemu-system-x86 5.8G"
    )
    assert refused.wait == "host"


def test_nothing_starts_under_twice_the_margin_with_full_pressure_until_under_1_percent() -> None:
    limits = replace(CAPS, memory_max=None)
    small = candidate(cap=1)
    stalled = run(small, [], limits, host=host(available=7, held=0, full=6.0))
    assert "stalling for memory" in refusal(stalled).message
    assert stalled.state.stalled
    # With more than twice the margin available a stall does not hold starts back.
    admitted(run(small, [], limits, host=host(available=9, held=0, full=30.0)))
    still = run(small, [], limits, host=host(available=7, held=0, full=3.0), state=stalled.state)
    assert refusal(still).resource == "memory"
    cleared = run(small, [], limits, host=host(available=7, held=0, full=0.9), state=still.state)
    admitted(cleared)
    assert not cleared.state.stalled


def test_a_stall_that_clears_stays_cleared_when_memory_max_refuses_the_start() -> None:
    limits = replace(CAPS, memory_max=8 * G)
    stalled = run(candidate(cap=1), [], limits, host=host(available=7, held=0, full=6.0))
    assert stalled.state.stalled
    # The pressure is gone, but a 9G runner does not fit the 8G MemoryMax: refused for memory,
    # and the state it answers with knows the stall is over.
    refused = run(
        candidate(cap=9), [], limits, host=host(available=7, held=0, full=0.5), state=stalled.state
    )
    assert "MemoryMax" in refusal(refused).message
    assert not refused.state.stalled


def test_the_margin_grows_by_half_after_a_host_wait_while_runners_run() -> None:
    limits = replace(CAPS, memory_max=None)
    running = [runner(1, cap=4)]
    reading = host(total=64, available=9, held=2)  # room 2 + 9 − 4 = 7G; 3G spare beside 4G
    first = run(candidate(cap=4), running, limits, host=reading)
    assert refusal(first).wait == "host"
    assert first.state.widened
    # Now the margin is 6G: a 2G runner that fitted the 3G spare no longer fits the 1G.
    assert (
        refusal(run(candidate(cap=2), running, limits, host=reading, state=first.state)).resource
        == "memory"
    )
    # Once one fits under the widened margin the host has room again.
    roomy = host(total=64, available=20, held=2)
    ok = run(candidate(cap=2), running, limits, host=roomy, state=first.state)
    admitted(ok)
    assert not ok.state.widened


def test_the_first_runner_into_an_empty_slice_needs_only_the_margin() -> None:
    limits = replace(CAPS, memory_max=None)
    widened = GuardState(widened=True)
    admitted(run(candidate(cap=4), [], limits, host=host(available=8.5, held=0), state=widened))


def test_without_a_recent_host_reading_only_memory_max_bounds_starts() -> None:
    old = replace(host(available=1, held=0), at=NOW - 60)
    admitted(run(candidate(cap=4), [], CAPS, host=old))


# ---- CPU ------------------------------------------------------------------------------------


def test_a_runner_starts_only_when_its_cpu_fits_the_budget() -> None:
    limits = replace(MEASURED, cpu_budget=8.0)
    running = [runner(i, reserved_cpu=2.0) for i in range(3)]
    refused = refusal(run(candidate(cpu=2.5), running, limits))
    assert refused.resource == "cpu"
    assert refused.message == "The host is short of CPU: needs 2.5 CPUs; CPU 6 of 8 CPUs reserved"
    assert admitted(run(candidate(cpu=2.0), running, limits)).cpu == 2.0


def test_under_caps_every_runner_reserves_its_profiles_cpus() -> None:
    limits = replace(CAPS, memory_max=None, cpu_budget=16.0)
    assert (
        refusal(
            run(candidate(cap=1, cpus=8), [runner(1, cap=1)], replace(limits, cpu_budget=15.0))
        ).resource
        == "cpu"
    )
    assert admitted(run(candidate(cap=1, cpus=8), [runner(1, cap=1)], limits)).cpu == 8.0


def test_one_runner_can_always_start_however_large_its_cpu() -> None:
    limits = replace(MEASURED, cpu_budget=4.0)
    assert admitted(run(candidate(cpu=6.0), [], limits)).cpu == 4.0


def test_once_a_job_waited_two_minutes_for_cpu_no_younger_job_starts_until_it_fits() -> None:
    limits = replace(MEASURED, cpu_budget=8.0)
    running = [runner(i, reserved_cpu=2.0) for i in range(3)]
    heavy = candidate(cpu=4.0, scale_set="images")
    light = candidate(cpu=1.0, scale_set="lint")
    held = run(heavy, running, limits)
    assert refusal(held).resource == "cpu"
    # A minute in, a light job still starts.
    state = run(heavy, running, limits, state=held.state, now=NOW + 60).state
    admitted(run(light, running, limits, state=state, now=NOW + 61))
    # Two minutes in, it does not.
    state = run(heavy, running, limits, state=state, now=NOW + 120).state
    blocked = refusal(run(light, running, limits, state=state, now=NOW + 121))
    assert blocked.message == "A job has waited 2m for CPU; no younger job starts until it fits"
    # The heavy job starts once it fits, and its record keeps how long it waited.
    ok = admitted(run(heavy, running[:1], limits, state=state, now=NOW + 150))
    assert ok.record.cpu_wait == 150


def test_a_job_holds_younger_ones_back_from_exactly_two_minutes_of_waiting_for_cpu() -> None:
    limits = replace(MEASURED, cpu_budget=8.0)
    running = [runner(i, reserved_cpu=2.0) for i in range(3)]
    state = run(candidate(cpu=4.0, scale_set="images"), running, limits).state
    light = candidate(cpu=1.0, scale_set="lint")
    admitted(run(light, running, limits, state=state, now=NOW + 119.9))
    assert refusal(run(light, running, limits, state=state, now=NOW + 120)).resource == "cpu"


def test_a_cpu_wait_runs_on_through_holds_for_memory_or_a_slot() -> None:
    limits = replace(MEASURED, cpu_budget=8.0)
    state = GuardState(cpu_waiting=(CpuWaiter("node-set", NOW - 100, NOW - 100),))
    held = run(candidate(slots=1), [runner(1)], limits, state=state)
    assert refusal(held).resource == "slots"
    assert held.state.cpu_waiting[0].since == NOW - 100
    assert held.state.cpu_waiting[0].last_asked == NOW


def test_the_cpu_line_says_when_a_job_waits() -> None:
    limits = replace(MEASURED, cpu_budget=32.0)
    running = [runner(i, reserved_cpu=10.0) for i in range(3)]
    waiting = GuardState(cpu_waiting=(CpuWaiter("x", NOW, NOW),))
    assert cpu_line(running, limits, waiting) == "CPU 30 of 32 CPUs reserved; a job waits for CPU"


# ---- disk -----------------------------------------------------------------------------------


def test_free_disk_must_stay_above_the_reserve_plus_the_runners_footprint() -> None:
    cand = candidate(disk=8 * G)
    refused = refusal(run(cand, [], disk=17 * G))
    assert refused.resource == "disk"
    assert (
        refused.message
        == "The disk is short: the runner needs 8G beside the 10G reserve; 17G is free"
    )
    admitted(run(cand, [], disk=18 * G))
