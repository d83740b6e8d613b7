"""runnerd's dashboard, served on ``[host] dashboard_listen`` (docs/runnerd-dashboard.md).

Four pages read what runnerd's local API and ``runnerctl`` already compute: the overview
(:func:`runnerd.api.status`), Sizing (:func:`runnerd.sizing.report.sizing_report`, applied
through the config editor and :func:`runnerd.sizing.apply.write`), a job's page (the history's
record and ``runnerctl job``'s sentence) and utilization (the history's jobs over time). HTML
shells and a small script live in this package; charts use the uPlot copy vendored under
``rungar/web/static/vendor/uplot``. No build step.
"""
