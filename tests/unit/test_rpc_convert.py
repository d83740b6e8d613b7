"""Model values survive the trip through protobuf messages, and odd peers map safely."""

from __future__ import annotations

from rungar.model.machine import (
    Conclusion,
    Created,
    CreateRequest,
    JobHint,
    Machine,
    MachineState,
    ProviderInfo,
    Refusal,
    RefusalKind,
    Removal,
)
from rungar.model.runner import RemovalReason
from rungar.model.runner_block import RunnerBlock
from rungar.rpc import convert
from rungar.rpc._gen.rungar.provider.v1 import provider_pb2 as pb


def test_a_create_request_round_trips_with_nested_extra_keys_and_hints() -> None:
    request = CreateRequest(
        runner_name="linux-0123abcd",
        request_id="req-1",
        scale_set="linux",
        labels={"rungar.sh/managed": "true"},
        runner=RunnerBlock(
            0.5, 512 * 1024**2, 0, "img", {"nested": {"a": [1, 2.5, "x"], "b": None}, "f": True}
        ),
        jit_config="secret",
        job_hints=(JobHint("o/r", "ci", "test", "99"),),
        deadline=1_700_000_000.5,
    )
    wire = convert.create_request_to_pb(request).SerializeToString()
    assert convert.create_request_from_pb(pb.CreateRequest.FromString(wire)) == request


def test_a_job_hint_carries_githubs_times_and_leaves_unknown_ones_unset() -> None:
    timed = JobHint("o/r", "ci", "test", "99", "main", "7", 1_700_000_000.25, 1_700_000_010.5, 0.0)
    message = convert.hint_to_pb(timed)
    assert message.HasField("queued_at") and message.HasField("started_at")
    assert not message.HasField("completed_at")
    wire = message.SerializeToString()
    assert convert.hint_from_pb(pb.JobHint.FromString(wire)) == timed
    untimed = convert.hint_from_pb(convert.hint_to_pb(JobHint("o/r", "ci", "test", "99")))
    assert (untimed.queued_at, untimed.started_at, untimed.completed_at) == (0.0, 0.0, 0.0)


def test_creates_in_a_row_carry_their_own_hints_whether_alike_or_not() -> None:
    def hints(*jobs: str, at: float = 1_700_000_000.5) -> tuple[JobHint, ...]:
        return tuple(JobHint("o/r", "ci", "test", job, "main", "7", at) for job in jobs)

    def create(job_hints: tuple[JobHint, ...]) -> CreateRequest:
        return CreateRequest("a", "k", "s", {}, RunnerBlock(), "j", job_hints)

    front = hints("1", "2", "3")
    sequence = [
        front,
        front,  # the very same values
        hints("1", "2", "3"),  # equal values, other objects
        hints("1", "2", "3", at=1_700_000_001.0),  # the same jobs, another time
        hints("2", "3"),
        (),
        front,
        hints("1", "2", "3", "4"),
    ]
    for job_hints in sequence:
        wire = convert.create_request_to_pb(create(job_hints)).SerializeToString()
        alone = pb.CreateRequest()
        alone.hints.extend([convert.hint_to_pb(h) for h in job_hints])
        assert pb.CreateRequest.FromString(wire).hints == alone.hints, job_hints
        decoded = convert.create_request_from_pb(pb.CreateRequest.FromString(wire))
        assert decoded.job_hints == job_hints
        update = pb.UpdateRunnerRequest(queued=[convert.hint_to_pb(h) for h in job_hints])
        assert convert.hints_from_pb(update.queued) == job_hints


def test_an_unset_deadline_stays_unset() -> None:
    request = CreateRequest("a", "k", "s", {}, RunnerBlock(), "j")
    message = convert.create_request_to_pb(request)
    assert not message.HasField("deadline")
    assert convert.create_request_from_pb(message).deadline == 0.0


def test_created_and_every_refusal_kind_round_trip() -> None:
    machine = Machine("m", MachineState.STOPPED, {"k": "v"}, "2 vCPU, 4G", 1234.25)
    outcomes: list[Created | Refusal] = [
        Created(machine),
        *(Refusal(kind, f"{kind} happened", "memory") for kind in RefusalKind),
    ]
    for outcome in outcomes:
        assert convert.create_response_from_pb(convert.create_response_to_pb(outcome)) == outcome


def test_an_unspecified_refusal_kind_is_failed_and_an_empty_message_is_filled() -> None:
    message = pb.CreateResponse(refused=pb.Refused(kind=pb.Refused.KIND_UNSPECIFIED))
    outcome = convert.create_response_from_pb(message)
    assert isinstance(outcome, Refusal) and outcome.kind is RefusalKind.FAILED
    assert outcome.message == "refused (failed) without a message"


def test_an_answer_with_no_outcome_is_a_failed_refusal() -> None:
    outcome = convert.create_response_from_pb(pb.CreateResponse())
    assert isinstance(outcome, Refusal) and outcome.kind is RefusalKind.FAILED


def test_an_unspecified_machine_state_reads_as_starting_and_the_provider_is_stamped() -> None:
    machine = convert.machine_from_pb(pb.Machine(name="m"), provider="gcp")
    assert machine.state is MachineState.STARTING
    assert machine.provider == "gcp" and machine.created_at == 0.0


def test_info_round_trips() -> None:
    info = ProviderInfo("host-a", "runnerd", "1.2.3", ("vcpus", "feature:job-hints"))
    assert convert.info_from_pb(convert.info_to_pb(info)) == info


def test_every_removal_reason_and_conclusion_round_trips_through_a_delete_request() -> None:
    hint = JobHint("o/r", ".github/workflows/ci.yml", "build", "9", "main", "77")
    for reason in RemovalReason:
        if reason is RemovalReason.ORPHANED:
            continue  # a registration without a machine: nothing is deleted
        removal = Removal(reason, None, None)
        message = convert.delete_request_to_pb("r1", removal)
        assert convert.removal_from_pb(message) == removal
    for conclusion in Conclusion:
        removal = Removal(RemovalReason.JOB_COMPLETED, conclusion, hint)
        message = pb.DeleteRequest.FromString(
            convert.delete_request_to_pb("r1", removal).SerializeToString()
        )
        assert (message.name, convert.removal_from_pb(message)) == ("r1", removal)


def test_a_delete_without_a_removal_or_with_a_reason_from_a_newer_rungar_says_nothing() -> None:
    assert convert.removal_from_pb(pb.DeleteRequest(name="r1")) is None
    newer = pb.DeleteRequest(name="r1")
    newer.removal.reason = 99  # type: ignore[assignment]  # a value this side has no name for
    newer.removal.conclusion = pb.Removal.SUCCEEDED
    assert convert.removal_from_pb(newer) is None


def test_a_job_hints_clock_offset_crosses_as_measured_and_unmeasured_stays_unset() -> None:
    measured = JobHint("o/r", "ci", "test", "99", queued_at=1_700_000_000.0, clock_offset=-3.5)
    wire = convert.hint_to_pb(measured).SerializeToString()
    assert convert.hint_from_pb(pb.JobHint.FromString(wire)).clock_offset == -3.5
    zero = convert.hint_to_pb(JobHint("o/r", "ci", "test", "99", clock_offset=0.0))
    assert zero.HasField("clock_offset")  # a measured 0 is not "unset"
    unmeasured = convert.hint_to_pb(JobHint("o/r", "ci", "test", "99"))
    assert not unmeasured.HasField("clock_offset")
    assert convert.hint_from_pb(unmeasured).clock_offset is None
    # Untrusted: a peer's NaN or infinity reads as not measured.
    odd = pb.JobHint(job_id="99", clock_offset=float("nan"))
    assert convert.hint_from_pb(odd).clock_offset is None
