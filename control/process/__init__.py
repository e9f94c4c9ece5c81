"""Process and start-up: settings, the `serve` command, everything before the first request
(migrations, secrets, bootstrap, first snapshot), file modes, logging, and the owner of every
background job."""
