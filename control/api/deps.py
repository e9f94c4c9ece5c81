"""FastAPI dependencies shared by the routers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends
from sqlalchemy.orm import Session

from control.api.security import CallerDep
from control.context import ControlContext, context_of

ContextDep = Annotated[ControlContext, Depends(context_of)]


def read_session(ctx: ContextDep) -> Iterator[Session]:
    with ctx.sessions() as session:
        yield session


SessionDep = Annotated[Session, Depends(read_session)]

__all__ = ["CallerDep", "ContextDep", "SessionDep"]
