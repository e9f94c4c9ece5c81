"""sluicegate's control plane: tenants, keys, pools, usage accounting, config push to the core."""
