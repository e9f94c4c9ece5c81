"""The admin API as HTTP: the app and its lifespan, errors turned into answers in one place,
who is calling (admin tokens, roles, the ASGI gate that acts before any body is read),
pagination and the shared request types."""
