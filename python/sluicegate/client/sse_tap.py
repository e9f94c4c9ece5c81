"""Reads a streamed answer as it reaches the client, the way the gateway's tap reads it as it
passes: the first event that carries generated content is the first token; content events are
counted (one per token for the servers we know); `usage` is picked up when the stream has it;
`[DONE]` or `message_stop` is a proper end, an `error` event a failure. The same rules on both
sides are what lets the client's TTFT and TPOT be compared with the gateway's usage rows."""

from __future__ import annotations

import json
from typing import Any


class SseTap:
    def __init__(self, anthropic: bool) -> None:
        self.anthropic = anthropic
        self._pending = b""
        self.first_token_at: float | None = None
        self.content_events = 0
        self.usage_output_tokens: int | None = None
        self.terminated = False
        self.error = False

    def feed(self, chunk: bytes, now: float) -> None:
        data = (self._pending + chunk).replace(b"\r\n", b"\n")
        start = 0
        while (end := data.find(b"\n\n", start)) != -1:
            self._observe(data[start:end], now)
            start = end + 2
        # A lone "\r" at the end may be the first half of "\r\n": kept for the next chunk.
        self._pending = data[start:]

    @property
    def output_tokens(self) -> int:
        """Like the gateway: the larger of the reported usage and the content events seen."""
        return max(self.usage_output_tokens or 0, self.content_events)

    def _observe(self, raw: bytes, now: float) -> None:
        lines = [
            line[5:].removeprefix(b" ") for line in raw.split(b"\n") if line.startswith(b"data:")
        ]
        if not lines:
            return
        payload = b"\n".join(lines)
        if payload == b"[DONE]":
            self.terminated = True
            return
        try:
            event = json.loads(payload)
        except ValueError:
            return
        if not isinstance(event, dict):
            return
        content = self._anthropic(event) if self.anthropic else self._openai(event)
        if content:
            self.content_events += 1
            if self.first_token_at is None:
                self.first_token_at = now

    def _openai(self, chunk: dict[str, Any]) -> bool:
        if "error" in chunk:
            self.error = True
            return False
        usage = chunk.get("usage")
        if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
            self.usage_output_tokens = usage["completion_tokens"]
        choices = chunk.get("choices")
        if not isinstance(choices, list):
            return False
        for choice in choices:
            if not isinstance(choice, dict):
                continue
            if choice.get("text"):
                return True
            delta = choice.get("delta")
            if isinstance(delta, dict) and (
                delta.get("content")
                or delta.get("reasoning_content")
                or delta.get("tool_calls") is not None
            ):
                return True
        return False

    def _anthropic(self, event: dict[str, Any]) -> bool:
        kind = event.get("type")
        if kind == "content_block_delta":
            return "delta" in event
        if kind == "message_delta":
            usage = event.get("usage")
            if isinstance(usage, dict) and isinstance(usage.get("output_tokens"), int):
                self.usage_output_tokens = usage["output_tokens"]  # cumulative: the last wins
        elif kind == "message_stop":
            self.terminated = True
        elif kind == "error":
            self.error = True
        return False
