"""`make demo` (`python -m sluicegate.demo`): the whole product on one machine."""
