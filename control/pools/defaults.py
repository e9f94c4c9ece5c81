"""The core's defaults of a pool's timeouts and policies, read from the extension
(`_core.config_defaults()`, built from `proxy_core/src/config/model.rs`): the one place they are
written. The pydantic models of `policies.py` and `schemas.py` take their defaults from here, and
`tests/control/test_contracts.py` checks that their fields are exactly the core's."""

from __future__ import annotations

import json
from typing import Any

from sluicegate import _core

CORE_DEFAULTS: dict[str, dict[str, Any]] = json.loads(_core.config_defaults())

TIMEOUTS = CORE_DEFAULTS["timeouts"]
ADMISSION = CORE_DEFAULTS["admission"]
RETRY = CORE_DEFAULTS["retry"]
EJECTION = CORE_DEFAULTS["ejection"]
HEALTH_CHECK = CORE_DEFAULTS["health_check"]
