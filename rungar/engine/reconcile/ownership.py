"""Whose listing speaks for which machine: a pure sort of one reconcile pass's listings
(docs/architecture.md: a reconcile pass, step 1).

A provider is trusted only with what it holds. Each runner belongs to the provider that created
it or first listed it; a machine of that name in any other provider's listing says nothing
about the runner (it is neither its state, nor a sign that it is gone) and is reported as a
:class:`ListingFault` of the provider that listed it. A listing is checked before it is
believed as well:

- a machine named twice in one listing is not acted on this pass (which entry is true is not
  known; one that says ``RUNNING`` then ``STOPPED`` must not end a busy runner);
- a machine with another installation's labels (the listing ignored the selector), or with a
  name no machine can have (empty, a space, past its bound), is left out;
- a machine whose provider label names another of our providers is left out without a word:
  two providers on one backend (one AWS region, say) list each other's machines.

Machines no provider holds go to the first provider that lists them (in configuration order),
so adoption keeps working for them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rungar.model import bounded
from rungar.model import labels as L
from rungar.model.machine import Machine

# The kinds of fault a listing can have, as the ``kind`` of its ``listing_fault`` event.
HELD_ELSEWHERE = "held_elsewhere"
LISTED_TWICE = "listed_twice"
OTHER_INSTALLATION = "other_installation"
NOT_A_NAME = "not_a_name"


@dataclass(frozen=True, slots=True)
class ListingFault:
    provider: str  # whose listing is at fault
    machine: str
    kind: str  # HELD_ELSEWHERE, LISTED_TWICE, OTHER_INSTALLATION or NOT_A_NAME
    holder: str = ""  # HELD_ELSEWHERE: the provider that holds the machine

    def sentence(self) -> str:
        if self.kind == HELD_ELSEWHERE:
            return (
                f"provider {self.provider} listed machine {self.machine}, "
                f"which provider {self.holder} holds: ignored"
            )
        if self.kind == LISTED_TWICE:
            return (
                f"provider {self.provider} listed machine {self.machine} more than once, "
                "with different states: not acted on"
            )
        if self.kind == OTHER_INSTALLATION:
            return (
                f"provider {self.provider} listed machine {self.machine}, "
                "which carries another installation's labels: ignored"
            )
        return (
            f"provider {self.provider} listed a machine named {self.machine!r}, "
            "not a machine name: ignored"
        )


@dataclass(frozen=True, slots=True)
class SortedListings:
    # The machines each runner's own listing says, by name, with the provider that listed them.
    machines: dict[str, tuple[str, Machine]]
    # Names listed in a way that cannot be believed this pass: their runners are left as they are.
    doubtful: frozenset[str]
    faults: tuple[ListingFault, ...]


def sort_listings(
    listings: Mapping[str, Sequence[Machine] | None],
    holders: Mapping[str, str],
    installation: str,
) -> SortedListings:
    """``listings``: each provider's answer, in configuration order (None: it did not answer);
    ``holders``: the provider of each runner the daemon tracks, by runner name."""
    machines: dict[str, tuple[str, Machine]] = {}
    doubtful: set[str] = set()
    faults: list[ListingFault] = []
    for provider, found in listings.items():
        seen: dict[str, Machine] = {}
        for machine in found or ():
            name = machine.name
            if not bounded.is_name(name):
                faults.append(ListingFault(provider, bounded.sentence(name, 64), NOT_A_NAME))
                continue
            # Made by another of our providers on a shared backend: not this one's to judge.
            if (machine.labels.get(L.PROVIDER) or provider) != provider:
                continue
            holder = holders.get(name)
            if holder is None and name in machines and machines[name][0] != provider:
                holder = machines[name][0]  # no runner yet: the first provider to list it
            if holder is not None and holder != provider:
                faults.append(ListingFault(provider, name, HELD_ELSEWHERE, holder))
                continue
            if machine.labels.get(L.INSTALLATION, installation) != installation:
                faults.append(ListingFault(provider, name, OTHER_INSTALLATION))
                doubtful.add(name)
                continue
            before = seen.get(name)
            if before is not None:
                if before.state is not machine.state:
                    faults.append(ListingFault(provider, name, LISTED_TWICE))
                    doubtful.add(name)
                continue
            seen[name] = machine
            machines[name] = (provider, machine)
    for name in doubtful:
        machines.pop(name, None)
    return SortedListings(machines, frozenset(doubtful), tuple(faults))
