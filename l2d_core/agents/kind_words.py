"""How an agent is known, in words read from its kind (``AgentSpec.kind``): what the pages, the
deploy box and the API say about an agent that cannot answer new text."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["KNOWN_BY", "known_only_by", "no_new_text"]

# what an agent that does not run is known by, by its kind
KNOWN_BY = {
    "prediction_file": "prediction file",
    "outcome_log": "outcome log (right or wrong, no answer text)",
}


def known_only_by(kinds: Sequence[str]) -> str:
    """What agents of ``kinds`` (one per agent) are known by, after "known only by".

    >>> known_only_by(["prediction_file"]), known_only_by(["outcome_log", "outcome_log"])
    ('its prediction file', 'their outcome logs (right or wrong, no answer text)')
    >>> known_only_by(["prediction_file", "outcome_log"])
    'their prediction file or outcome log (right or wrong, no answer text)'
    """
    words = list(dict.fromkeys(KNOWN_BY.get(k, f"what it recorded ({k.replace('_', ' ')})") for k in kinds))
    if len(kinds) == 1:
        return f"its {words[0]}"
    if len(words) == 1:
        head, _, tail = words[0].partition(" (")
        return f"their {head}s" + (f" ({tail}" if tail else "")
    return "their " + " or ".join(words)


def no_new_text(kind: str) -> str:
    """Why an agent of ``kind`` gives no answer to new text, after its id ("bert-tiny …").

    >>> no_new_text("outcome_log")
    'is known only by its outcome log (right or wrong, no answer text) and cannot answer new text'
    """
    if kind in KNOWN_BY:
        return f"is known only by {known_only_by([kind])} and cannot answer new text"
    return f"is of kind {kind!r}, which this tool does not run on new text yet"
