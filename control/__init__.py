"""sluicegate's control plane: tenants, keys, pools, usage accounting, config push to the core.

The import name `control` is also taken by an unrelated PyPI distribution; `OWNER` is how the
`sluicegate` command tells this package from that one (`sluicegate/cli/control_plane.py`)."""

OWNER = "sluicegate"
