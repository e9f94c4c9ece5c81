"""The doctor: stated rules applied to the core's windowed status, per pool, in plain words with
the numbers behind them (`GET /v1/admin/diagnosis`, `sluicegate doctor`, and the scale-advice
gauge on `/metrics`)."""
