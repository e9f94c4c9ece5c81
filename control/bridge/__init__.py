"""The control plane's side of the core: the one owner of `Core` (`core_bridge.py`), the one way
to change state (`mutation.py`: lock, transaction, snapshot, push, commit), the snapshot built
from the database (`snapshot.py`), the control-state row (`state.py`), and the mapping of the
core's refusals back to resources and fields (`refusal.py`)."""
