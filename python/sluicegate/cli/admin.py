"""Running an admin command: the request its options make, sent by the one client, and the
answer printed for a person or, with `--json`, as it came."""

from __future__ import annotations

import argparse

from sluicegate.cli.client import AdminClient, run
from sluicegate.cli.output import as_json, write


def run_admin(args: argparse.Namespace) -> int:
    def send(client: AdminClient) -> int:
        request = args.handler(args)
        if getattr(args, "download", False):
            client.download(request.path, request.query, args.output)
            return 0
        answer = client.call(*request)
        if answer is not None:
            write(as_json(answer) if args.json else args.render(answer))
        return 0

    return run(args, send)
