"""GitHub's assigned count, checked against the jobs it sent and the runners left idle.

After GitHub incidents a scale set's statistics can keep ``TotalAssignedJobs`` high with no job
behind it, and an autoscaler that takes the count as given keeps idle runners for hours. An idle
runner of the scale set disproves such a count: GitHub hands an assigned job to any idle runner
of its scale set within seconds. So while the count stays above the jobs GitHub sent (waiting or
running) and runners stay idle, for ``after`` seconds in a row, as many of the unexplained jobs
as the fewest runners idle all that time are judged not to exist, and scaling counts the rest
(docs/github.md, "When GitHub's count goes stale").

The judgement lasts while the count stays that high: it shrinks as soon as GitHub's count comes
down toward the jobs it sent, so a count GitHub corrects is believed again at once. Jobs it never
sent beyond the judged ones (a restart's, whose messages came before it) are counted as given
until idle runners disprove them too.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class StatisticsCheck:
    """What the check carries from one scaling step to the next."""

    suspect_since: float | None = None  # since when jobs were unexplained with runners idle
    fewest_idle: int = 0  # the fewest idle runners seen since then
    discount: int = 0  # assigned jobs judged not to exist


@dataclass(frozen=True, slots=True)
class Judged:
    check: StatisticsCheck
    reported: int  # GitHub's assigned count
    known: int  # the jobs GitHub sent that wait or run
    counted: int  # what scaling counts

    @property
    def sentence(self) -> str:
        """What ``rungar status`` says of a discounted count, or ``""``."""
        if not self.check.discount:
            return ""
        return (
            f"GitHub counts {self.reported} jobs assigned, but sent {self.known} and its idle "
            f"runners get none: counting {self.counted}"
        )


def judge(
    check: StatisticsCheck, *, reported: int, known: int, idle: int, now: float, after: float
) -> Judged:
    """The count to scale by: ``reported`` (GitHub's) less the jobs idle runners disproved.

    ``known``: the jobs GitHub sent for the scale set that have not completed (waiting or
    running); ``idle``: its runners connected and idle now; ``after``: how long both must last.
    """
    excess = max(0, reported - known)
    discount = min(check.discount, excess)  # a count GitHub brought down is believed again
    unexplained = excess - discount
    suspect_since: float | None
    if unexplained == 0 or idle == 0:
        suspect_since, fewest = None, 0
    elif check.suspect_since is None:
        suspect_since, fewest = now, idle
    else:
        suspect_since, fewest = check.suspect_since, min(check.fewest_idle, idle)
    if suspect_since is not None and now - suspect_since >= after:
        discount += min(unexplained, fewest)
        suspect_since, fewest = None, 0  # what idle runners did not disprove is watched anew
    counted = reported - discount
    return Judged(StatisticsCheck(suspect_since, fewest, discount), reported, known, counted)
