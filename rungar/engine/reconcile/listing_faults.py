"""What a reconcile pass says of a listing it did not believe (the listings are sorted by
:mod:`rungar.engine.reconcile.ownership`): once per provider, fault and machine, an event, a
warning and the sentence kept for ``rungar status`` (docs/concepts.md, "Holder")."""

from __future__ import annotations

import structlog

from rungar.engine.core.context import EngineContext
from rungar.engine.reconcile.ownership import ListingFault

log = structlog.get_logger("rungar.engine")

LISTING_FAULTS_KEPT = 200  # the listing faults rungar status can show, the latest ones


def note_listing_faults(ctx: EngineContext, faults: tuple[ListingFault, ...]) -> None:
    """Say once per provider, fault and machine what a listing said that was not believed: an
    event, a warning and the sentence kept for ``rungar status``."""
    known = ctx.findings.listing_faults
    for fault in faults:
        key = (fault.provider, fault.kind, fault.machine)
        if key in known:
            continue
        sentence = fault.sentence()
        known[key] = sentence
        while len(known) > LISTING_FAULTS_KEPT:
            del known[next(iter(known))]
        ctx.events.record(
            "provider",
            fault.provider,
            "listing_fault",
            provider=fault.provider,
            message=sentence,
            fault=fault.kind,
            machine=fault.machine,
            holder=fault.holder,
        )
        log.warning(
            "provider.listing_fault",
            sentence=sentence,
            provider=fault.provider,
            fault=fault.kind,
            machine=fault.machine,
            holder=fault.holder,
        )
