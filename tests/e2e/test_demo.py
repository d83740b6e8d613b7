"""`make demo` as a newcomer sees it: every provider used, FULL for memory, a priority hold,
a runner waiting for a host's expected room instead of going to AWS, what each host learnt, and
what a developer sees on GitHub: a job waiting on a hold with its commit status while it waits,
and the job no provider can take cancelled with its reason.

The whole loopback world runs: the GitHub emulator, three `runnerd serve` processes whose
runners are real `rungar fake-runner` processes, AWS on moto's server, and the daemon. It runs
for about half a minute of wall clock, so only `make test-long` runs it.
"""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from rungar.demo.placement_story import timelines
from rungar.demo.scenario import HUGE_RUN, Burst, run_demo


@pytest.mark.long
async def test_the_demo_runs_every_job_with_refusals_and_a_hold_and_tells_why_on_github() -> None:
    console = Console(file=io.StringIO(), width=132)
    summary = await run_demo(console, burst=Burst(), live=False)
    assert summary.ok, f"{summary.completed} of {summary.jobs} jobs finished"
    assert set(summary.runners_by_provider) == {"host1", "host2", "host3", "aws"}
    assert summary.refusals[("FULL", "memory")] > 0
    assert summary.holds, "the large scale set held a full host"
    # A runner waited for a host that expected room soon rather than go to AWS (not at its
    # limit), and a runner followed on a host.
    assert summary.host_waits, "no runner waited for a host's expected room"
    assert "waits for host" in summary.host_waits[0][0]
    assert set(summary.after_host_waits) & {"host1", "host2", "host3"}, summary.after_host_waits
    # Priority pays off: the priority-10 scale set's jobs wait less than the small ones'.
    waits = {name: sorted(w) for name, w in summary.waits_by_scale_set.items()}
    assert set(waits) == {"demo-small", "demo-large"}
    p95 = {name: w[max(0, -(-95 * len(w) // 100) - 1)] for name, w in waits.items()}
    assert p95["demo-large"] < p95["demo-small"], p95
    # Each host recorded its jobs with GitHub's conclusions, none wrongly cancelled, and
    # measured admission predicted some before the end.
    assert [h.host for h in summary.learning] == ["host1", "host2", "host3"]
    assert sum(h.jobs for h in summary.learning) > 0
    assert not any(h.conclusions["cancelled"] for h in summary.learning)
    assert sum(h.predicted for h in summary.learning) > 0
    # On GitHub: the job whose runner fits nowhere had its run cancelled, its status failed
    # with the hosts' answer; a job waiting on a hold had a pending status saying so.
    assert summary.cancelled == 1 and summary.runs_cancelled == [HUGE_RUN]
    told = {t.scale_set: t for t in summary.on_github}
    assert told["demo-huge"].state == "failure", told
    assert "refuses its runner as invalid" in told["demo-huge"].ended, told
    assert any(t.held and t.waiting.startswith("waiting ") for t in told.values()), told
    # why the ignore[attr-defined] below: the Console's file is the StringIO given above
    out = console.file.getvalue()  # type: ignore[attr-defined]
    assert "rungar demo: what happened" in out
    assert "  fleet page       http://127.0.0.1:" in out
    assert "wait, demo-large" in out and "wait, demo-small" in out
    assert "held room stood empty" in out
    assert "instead of going to AWS, as " in out
    assert "on GitHub, demo-huge" in out and "on GitHub, demo-small" in out
    assert "cancelled: no provider can take its runner" in out


def test_the_placement_timelines_tell_a_pack_fallback_and_a_priority_hold() -> None:
    pack, priority = timelines()
    pack_text = "\n".join(pack.lines)
    assert "compute1 refuses rungar-c4-m8's runner: FULL" in pack_text
    assert "compute2 creates" in pack_text and "gcp creates" in pack_text
    assert "rungar-c4-m8 skips compute1: full" in pack_text
    priority_text = "\n".join(priority.lines)
    assert "compute1 is HELD for rungar-c8-m16 (priority 10)" in priority_text
    assert "held for scale set rungar-c8-m16" in priority_text
    assert "compute1 creates rungar-c8-m16-" in priority_text
    assert "room opened on compute1, held for rungar-c8-m16: it is tried there now" in priority_text
    assert "compute2 is HELD for rungar-c8-m16" in priority_text, "every full host is held"
