"""Grafana's dashboard JSON model at schema version 39 (Grafana 10.3 to 11.x; the version the
dashboards declare, so Grafana loads them without migrating), checked field by field: the fields
the model defines and their types, the required ones, grid positions on the 24-column grid,
unique panel ids and query refIds, variables and data sources. An unknown or misspelled field
fails, as do a wrong type and overlapping panels."""

from __future__ import annotations

from typing import Any

SCHEMA_VERSION = 39

DASHBOARD_FIELDS: dict[str, type | tuple[type, ...]] = {
    "id": (int, type(None)),
    "uid": str,
    "title": str,
    "description": str,
    "revision": int,
    "gnetId": (str, type(None)),
    "tags": list,
    "timezone": str,
    "editable": bool,
    "graphTooltip": int,
    "time": dict,
    "timepicker": dict,
    "fiscalYearStartMonth": int,
    "liveNow": bool,
    "weekStart": str,
    "refresh": (str, bool),
    "schemaVersion": int,
    "version": int,
    "panels": list,
    "templating": dict,
    "annotations": dict,
    "links": list,
    "snapshot": dict,
}
DASHBOARD_REQUIRED = {"uid", "title", "schemaVersion", "panels", "templating", "annotations",
                      "time", "editable", "graphTooltip"}  # fmt: skip

PANEL_FIELDS: dict[str, type | tuple[type, ...]] = {
    "id": int,
    "type": str,
    "title": str,
    "description": str,
    "datasource": dict,
    "gridPos": dict,
    "targets": list,
    "fieldConfig": dict,
    "options": dict,
    "pluginVersion": str,
    "transparent": bool,
    "links": list,
    "repeat": str,
    "repeatDirection": str,
    "maxDataPoints": (int, float),
    "interval": str,
    "timeFrom": str,
    "timeShift": str,
    "transformations": list,
    "collapsed": bool,
    "panels": list,
}
PANEL_TYPES = {"timeseries", "stat", "gauge", "bargauge", "table", "text", "row", "heatmap",
               "piechart", "state-timeline", "status-history", "histogram"}  # fmt: skip
TARGET_FIELDS: dict[str, type] = {
    "refId": str,
    "datasource": dict,
    "expr": str,
    "legendFormat": str,
    "range": bool,
    "instant": bool,
    "editorMode": str,
    "format": str,
    "interval": str,
    "hide": bool,
    "exemplar": bool,
    "intervalFactor": int,
}
VARIABLE_TYPES = {"query", "datasource", "custom", "constant", "interval", "textbox", "adhoc"}
VARIABLE_FIELDS = {"type", "name", "label", "description", "query", "datasource", "current",
                   "options", "hide", "refresh", "regex", "sort", "multi", "includeAll",
                   "allValue", "definition", "skipUrlSync"}  # fmt: skip
FIELD_CONFIG_DEFAULTS = {"unit", "decimals", "min", "max", "color", "custom", "thresholds",
                         "mappings", "displayName", "noValue", "links"}  # fmt: skip


def _typed(where: str, value: Any, expected: type | tuple[type, ...]) -> None:
    # bool is an int in Python: an int field must not hold a bool.
    if expected is int or expected == (int, float):
        assert not isinstance(value, bool), f"{where}: {value!r} is a boolean"
    assert isinstance(value, expected), f"{where}: {value!r} is not {expected}"


def _fields(where: str, obj: dict[str, Any], known: dict[str, Any] | set[str]) -> None:
    unknown = set(obj) - set(known)
    assert not unknown, f"{where}: fields the schema does not define: {sorted(unknown)}"
    if isinstance(known, dict):
        for name, value in obj.items():
            _typed(f"{where}.{name}", value, known[name])


def _datasource(where: str, ds: Any) -> None:
    assert isinstance(ds, dict) and set(ds) <= {"type", "uid"}, f"{where}: {ds!r}"
    assert isinstance(ds.get("type"), str) and isinstance(ds.get("uid"), str), where


def _panel(where: str, panel: dict[str, Any], variables: set[str]) -> None:
    _fields(where, panel, PANEL_FIELDS)
    assert {"id", "type", "title", "gridPos"} <= set(panel), f"{where}: id, type, title, gridPos"
    assert panel["type"] in PANEL_TYPES, f"{where}: panel type {panel['type']!r}"
    grid = panel["gridPos"]
    assert set(grid) <= {"h", "w", "x", "y", "static"} and {"h", "w", "x", "y"} <= set(grid), where
    for k in ("h", "w", "x", "y"):
        _typed(f"{where}.gridPos.{k}", grid[k], int)
    assert 1 <= grid["w"] <= 24 and grid["x"] >= 0 and grid["x"] + grid["w"] <= 24, where
    assert grid["h"] >= 1 and grid["y"] >= 0, where
    if panel["type"] == "text":
        assert panel.get("options", {}).get("mode") in {"markdown", "html", "code"}, where
        return
    _datasource(f"{where}.datasource", panel.get("datasource"))
    uid = panel["datasource"]["uid"]
    assert not uid.startswith("$") or uid.strip("${}") in variables, f"{where}: {uid}"
    targets = panel.get("targets", [])
    assert targets, f"{where}: a data panel needs queries"
    refs = [t.get("refId") for t in targets]
    assert len(set(refs)) == len(refs) and all(isinstance(r, str) and r for r in refs), where
    for i, target in enumerate(targets):
        _fields(f"{where}.targets[{i}]", target, TARGET_FIELDS)
        assert target.get("expr"), f"{where}.targets[{i}]: no expr"
        _datasource(f"{where}.targets[{i}].datasource", target.get("datasource"))
    config = panel.get("fieldConfig", {"defaults": {}, "overrides": []})
    assert set(config) == {"defaults", "overrides"}, f"{where}.fieldConfig"
    assert isinstance(config["defaults"], dict) and isinstance(config["overrides"], list), where
    _fields(f"{where}.fieldConfig.defaults", config["defaults"], FIELD_CONFIG_DEFAULTS)


def _variable(where: str, variable: dict[str, Any]) -> None:
    _fields(where, variable, VARIABLE_FIELDS)
    assert variable.get("type") in VARIABLE_TYPES, f"{where}: type {variable.get('type')!r}"
    assert isinstance(variable.get("name"), str) and variable["name"], where
    if variable["type"] == "query":
        _datasource(f"{where}.datasource", variable.get("datasource"))
        query = variable.get("query")
        assert isinstance(query, (str, dict)), where
        if isinstance(query, dict):
            assert isinstance(query.get("query"), str) and query["query"], where
        assert variable.get("refresh") in (1, 2), f"{where}: refresh on load (1) or time change (2)"
    if variable["type"] == "datasource":
        assert isinstance(variable.get("query"), str), f"{where}: the data source plugin id"


def _overlaps(a: dict[str, int], b: dict[str, int]) -> bool:
    return (
        a["x"] < b["x"] + b["w"]
        and b["x"] < a["x"] + a["w"]
        and a["y"] < b["y"] + b["h"]
        and b["y"] < a["y"] + a["h"]
    )


def check_dashboard(d: dict[str, Any]) -> None:
    where = d.get("uid", "?")
    _fields(where, d, DASHBOARD_FIELDS)
    missing = DASHBOARD_REQUIRED - set(d)
    assert not missing, f"{where}: missing {sorted(missing)}"
    assert d["schemaVersion"] == SCHEMA_VERSION, f"{where}: schemaVersion {d['schemaVersion']}"
    assert 1 <= len(d["uid"]) <= 40 and all(c.isalnum() or c in "-_" for c in d["uid"]), where
    assert d["title"].strip(), where
    assert d["graphTooltip"] in (0, 1, 2), where
    assert set(d["time"]) == {"from", "to"}, where
    assert all(isinstance(t, str) for t in d.get("tags", [])), where
    annotations = d["annotations"]
    assert set(annotations) == {"list"} and isinstance(annotations["list"], list), where
    templating = d["templating"]
    assert set(templating) == {"list"} and isinstance(templating["list"], list), where
    names = [v.get("name") for v in templating["list"]]
    assert len(set(names)) == len(names), f"{where}: variable names repeat"
    for i, variable in enumerate(templating["list"]):
        _variable(f"{where}.templating.list[{i}]", variable)
    ids = [p.get("id") for p in d["panels"]]
    assert len(set(ids)) == len(ids), f"{where}: panel ids repeat"
    for panel in d["panels"]:
        _panel(f"{where}.panels[{panel.get('id')}]", panel, set(names))
    grids = [p["gridPos"] for p in d["panels"]]
    for i, a in enumerate(grids):
        for b in grids[i + 1 :]:
            assert not _overlaps(a, b), f"{where}: panels overlap at {a} and {b}"
