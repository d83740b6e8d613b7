"""The emulator's signed webhooks reach Rungar's receiver over HTTP."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from rungar.github.webhook import WebhookReceiver
from rungar.testing.github_emulator import GitHubEmulator, JobSpec
from rungar.testing.github_emulator.harness import eventually, fast_options
from rungar.web.bounded import BoundedHttpServer, bind

SECRET = "webhook-secret"


@contextlib.asynccontextmanager
async def serving(receiver: WebhookReceiver) -> AsyncIterator[str]:
    server = BoundedHttpServer(
        receiver, bind("127.0.0.1:0", key="webhook.listen"), on_refused=receiver.count
    )
    server.start()
    try:
        yield f"http://{server.address}/webhook"
    finally:
        server.stop()


async def test_signed_deliveries_wake_the_matching_scale_set_and_duplicates_are_dropped() -> None:
    woken: list[list[str]] = []
    receiver = WebhookReceiver(
        SECRET, {"linux": ["rungar"]}, lambda names, job: woken.append(list(names))
    )
    async with serving(receiver) as url:
        options = fast_options(webhook_url=url, webhook_secret=SECRET)
        async with GitHubEmulator(options) as emu:
            assert emu.webhooks is not None
            emu.webhooks.duplicate = True
            emu.state.queue_job(JobSpec(labels=("self-hosted", "rungar")))
            emu.state.queue_job(JobSpec(labels=("self-hosted", "windows")))
            await emu.webhooks.drain()
            delivery = next(iter(emu.webhooks.deliveries))
            emu.webhooks.duplicate = False
            assert emu.webhooks.redeliver(delivery)
            await emu.webhooks.drain()
            emu.webhooks.wrong_signature = True
            emu.state.queue_job(JobSpec(labels=("rungar",)))
            await emu.webhooks.drain()
            await eventually(lambda: sum(receiver.counts.values()) == 6, what="six deliveries")
    assert woken == [["linux"]]
    assert receiver.counts == {"accepted": 2, "duplicate": 3, "bad_signature": 1}
