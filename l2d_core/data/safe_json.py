"""JSON from users' files with a bound on nesting: ``"[" * 100000`` must be a one-line refusal,
not a ``RecursionError`` from deep inside the parser.

The depth is measured before parsing, in time linear in the size of the text: escape pairs
(``\\x``) are dropped, then the brackets outside strings are summed in blocks (numpy). None of
this needs the text to be valid JSON; the parser still decides that.

>>> nesting_depth(b'{"a": [1, [2, "]]]["]]}')
3
>>> loads('{"q1": "x"}')
{'q1': 'x'}
>>> loads("[" * 100 + "]" * 100)
Traceback (most recent call last):
...
l2d_core.data.safe_json.JSONNestingError: arrays or objects nested more than 64 levels deep
"""

from __future__ import annotations

import json
import re

import numpy as np

__all__ = ["MAX_DEPTH", "JSONNestingError", "nesting_depth", "check_nesting", "loads"]

MAX_DEPTH = 64  # a prediction file needs 1, a cost file 2, a SQuAD file 9
_ESCAPE = re.compile(rb"\\.", re.DOTALL)  # one escape pair; matches never overlap, so this is linear
_QUOTE = ord('"')
_STEP = np.zeros(256, dtype=np.int8)  # +1 for an opening bracket, -1 for a closing one
_STEP[list(b"[{")] = 1
_STEP[list(b"]}")] = -1
_BLOCK = 1 << 22


class JSONNestingError(ValueError):
    """JSON nested deeper than the bound (not a file this tool reads)."""

    def __init__(self, limit: int = MAX_DEPTH) -> None:
        super().__init__(f"arrays or objects nested more than {limit} levels deep")
        self.limit = limit


def _as_bytes(data: bytes | bytearray | memoryview | str) -> bytes:
    return data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)


def nesting_depth(data: bytes | str, stop_above: int | None = None) -> int:
    """How deep arrays and objects nest in JSON text (brackets inside strings do not count);
    with ``stop_above``, stops at the first block that goes deeper and returns its depth so far."""
    raw = _as_bytes(data)
    text = np.frombuffer(_ESCAPE.sub(b"", raw) if b"\\" in raw else raw, dtype=np.uint8)
    deepest = depth = in_string = 0
    for at in range(0, len(text), _BLOCK):
        block = text[at : at + _BLOCK]
        # With escapes gone every quote opens or closes a string: a byte lies inside a string when
        # an odd number of quotes come before it (a uint8 running count keeps its parity).
        quotes = np.cumsum(block == _QUOTE, dtype=np.uint8)
        steps = _STEP[block]
        steps[((quotes + in_string) & 1).astype(bool)] = 0
        steps = steps[steps != 0]
        if steps.size:
            running = np.cumsum(steps, dtype=np.int64) + depth
            deepest, depth = max(deepest, int(running.max())), int(running[-1])
        in_string = (in_string + int(quotes[-1])) & 1
        if stop_above is not None and deepest > stop_above:
            break
    return deepest


def check_nesting(data: bytes | str, limit: int = MAX_DEPTH) -> None:
    """Raise :class:`JSONNestingError` when ``data`` nests deeper than ``limit``."""
    raw = _as_bytes(data)
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return  # too few brackets to nest that deep (every prediction file): no scan needed
    if nesting_depth(raw, stop_above=limit) > limit:
        raise JSONNestingError(limit)


def loads(data: bytes | str, limit: int = MAX_DEPTH, **kwargs):
    """``json.loads`` of text checked by :func:`check_nesting` first (``kwargs`` go to it).
    Bytes are decoded as UTF-8 (a byte-order mark is dropped; ``UnicodeDecodeError`` otherwise)
    before the check, so a binary file is reported as such."""
    text = data.decode("utf-8-sig") if isinstance(data, bytes | bytearray) else data
    check_nesting(data, limit)
    try:
        return json.loads(text, **kwargs)
    except RecursionError:  # not reachable below the bound; kept so no parse can end in a traceback
        raise JSONNestingError(limit) from None
