"""``job_reasons:`` in scale_sets.yaml: every timing of the writes is a key, its default the
documented one (docs/configuration.md, ``job_reasons``)."""

from __future__ import annotations

from rungar.config.loader import parse_scale_sets
from rungar.engine.jobs.reason_plan import turn_every

BASE = """\
providers:
  - {name: host, type: fake}
scale_sets:
  - {name: linux, max_runners: 2, providers: [host]}
"""


def test_unset_the_writes_are_off_with_the_documented_timings() -> None:
    reasons = parse_scale_sets(BASE, "/etc/rungar/s.yaml").job_reasons
    assert not reasons.enabled
    assert (reasons.after, reasons.update_every) == (60.0, 60.0)
    assert (reasons.rest_share, reasons.burst_share, reasons.burst_window) == (5, 10, 60.0)
    assert reasons.turn_every is None
    assert turn_every(reasons) == 5.0  # a quarter of a minute, at most 5 s


def test_each_timing_is_read_from_its_key() -> None:
    text = BASE + (
        "job_reasons: {enabled: true, after: 2m, update_every: 90s, rest_share: 3,\n"
        "  burst_share: 25, burst_window: 5m, turn_every: 2s}\n"
    )
    reasons = parse_scale_sets(text, "/etc/rungar/s.yaml").job_reasons
    assert (reasons.after, reasons.update_every) == (120.0, 90.0)
    assert (reasons.rest_share, reasons.burst_share, reasons.burst_window) == (3, 25, 300.0)
    assert turn_every(reasons) == 2.0
    quick = parse_scale_sets(BASE + "job_reasons: {after: 2s}\n", "/etc/rungar/s.yaml")
    assert turn_every(quick.job_reasons) == 0.5  # a quarter of the 2 s threshold
