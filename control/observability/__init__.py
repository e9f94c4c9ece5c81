"""Prometheus exposition on the admin port: the core's metrics read at scrape time, the control
plane's own, and the doctor's scale advice per pool."""
