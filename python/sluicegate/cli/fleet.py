"""`sluicegate fleet`: the live replicas of the fleet, the config version each runs (or refused),
whether their limits are shared through Redis, on local shares, or their own, and the leader."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from sluicegate.cli.client import AdminClient, run
from sluicegate.cli.output import as_json, table, write


def replica_rows(replicas: list[Mapping[str, Any]]) -> list[list[str]]:
    rows = []
    for r in replicas:
        version = str(r["applied_version"] if r["applied_version"] is not None else "-")
        if r.get("refused_version") is not None:
            version += f" (refused {r['refused_version']})"
        rows.append(
            [
                r["name"],
                r["data_address"],
                version,
                r["limits_mode"],
                "yes" if r["leader"] else "",
                "yes" if r["ready"] else "no",
                r["heartbeat_at"],
            ]
        )
    return rows


REPLICA_HEADER = ["replica", "data", "config", "limits", "leader", "ready", "last heard"]


def render_fleet(fleet: Mapping[str, Any]) -> str:
    state = "in step" if fleet["in_step"] else "NOT in step"
    lines = [
        f"fleet: {len(fleet['replicas'])} live replicas, committed config version "
        f"{fleet['committed_version']} ({state})",
        *table(REPLICA_HEADER, replica_rows(fleet["replicas"]), "  "),
    ]
    return "\n".join(lines) + "\n"


def register(sub: Any, conn: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "fleet",
        parents=[conn],
        help="the fleet's replicas: config version each runs, limits shared or local, leader",
    )
    p.set_defaults(run=run_fleet)


def run_fleet(args: argparse.Namespace) -> int:
    def show(api: AdminClient) -> int:
        answer = api.call("GET", "/v1/admin/fleet")
        write(as_json(answer) if args.json else render_fleet(answer))
        return 0

    return run(args, show, timeout=10.0)
