"""Windowed status per pool and route, read from the core (`GET /v1/admin/status`,
`sluicegate status`)."""
