"""A fleet: several `serve` replicas on one PostgreSQL database (and one Redis for the limits
they share while requests run). Each replica announces itself (`heartbeat.py`), follows the
committed configuration and drills (`follower.py`), and one of them, elected by an advisory lock,
runs the jobs that must run once for the fleet (`leader.py`). With SQLite there is one process:
it is its own fleet and its own leader."""
