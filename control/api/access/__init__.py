"""Who may call the admin API, decided from a request's head before any route runs: the token
(`identify.py`), its call rate (`ratelimit.py`), and the ASGI gate in front of the app that
refuses before a body is read (`gate.py`). Roles are worked out in one place only,
`control.api.security.authenticate`, from the identity found here."""
