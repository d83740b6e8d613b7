"""The examples' loopback Spot market recognises a Spot launch in EC2's query protocol."""

from __future__ import annotations

from urllib.parse import urlencode

from rungar.demo.spotmarket import is_spot_launch


def body(**params: str) -> bytes:
    return urlencode(params).encode()


def test_a_run_instances_on_the_spot_market_is_a_spot_launch() -> None:
    launch = body(
        Action="RunInstances",
        Version="2016-11-15",
        **{"InstanceMarketOptions.MarketType": "spot", "ImageId": "ami-1"},
    )
    assert is_spot_launch(launch)


def test_an_on_demand_launch_and_other_calls_pass_through() -> None:
    assert not is_spot_launch(body(Action="RunInstances", ImageId="ami-1"))
    assert not is_spot_launch(
        body(Action="DescribeInstances", **{"InstanceMarketOptions.MarketType": "spot"})
    )
    assert not is_spot_launch(b"")
