"""`make demo` ends with the console's address and the token to sign in with."""

from __future__ import annotations

import pytest
from sluicegate.demo.__main__ import console


def test_the_demo_ends_with_the_console_and_how_to_sign_in(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SLUICEGATE_DEMO_HOLD", raising=False)
    console("127.0.0.1:18081", "demo-0123abcd")
    lines = capsys.readouterr().out.strip().splitlines()
    assert any("http://127.0.0.1:18081/console" in line for line in lines)
    assert any("demo-0123abcd" in line and "sign-in" in line for line in lines)
