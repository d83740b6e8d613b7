"""The daemon's HTTP listeners (webhook, metrics, dashboards), all built by :mod:`.bounded`."""
