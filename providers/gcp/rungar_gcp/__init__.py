"""Rungar's Google Compute Engine provider (``rungar-provider-gcp``).

One provider is one project and region. ``rungar_gcp.provider.GcpProvider`` implements the
``rungar.model.provider.Provider`` protocol; the google-cloud-compute SDK is imported only by
``rungar_gcp.compute``, and only when a real client is opened, so importing this package costs
nothing (the SDK alone takes about a second to import).
"""
