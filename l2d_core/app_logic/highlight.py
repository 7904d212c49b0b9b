"""Answers highlighted in their context, as HTML that shows text verbatim (no tags, no markdown
emphasis or math from the data)."""

from __future__ import annotations

import html
import re

__all__ = [
    "GOLD_COLOR",
    "AGENT_COLORS",
    "label_colors",
    "answer_spans",
    "highlight_segments",
    "md_plain",
    "context_html",
    "legend_html",
]

# Highlight colours: gold answers first, then one per agent in pool order.
GOLD_COLOR = "#ffd54f"
AGENT_COLORS = (
    "#90caf9",
    "#a5d6a7",
    "#f48fb1",
    "#ce93d8",
    "#ffab91",
    "#80deea",
    "#e6ee9c",
    "#bcaaa4",
    "#b0bec5",
    "#fff59d",
    "#c5e1a5",
    "#9fa8da",
)
# Characters that markdown (or its math extension) would interpret, as HTML entities.
_MARKDOWN_SAFE = str.maketrans({c: f"&#{ord(c)};" for c in "$*_`~[]\\#|"})


def label_colors(agent_ids) -> dict[str, str]:
    """Highlight colour of the gold answer and of each agent."""
    return {"gold": GOLD_COLOR, **{a: AGENT_COLORS[j % len(AGENT_COLORS)] for j, a in enumerate(agent_ids)}}


def answer_spans(context: str, answers) -> list[tuple[int, int, str]]:
    """Character spans ``(start, end, label)`` of labelled answers in ``context``: the first
    case-insensitive occurrence of each ``(label, text)``; empty or absent answers get none.

    >>> answer_spans("The Eiffel Tower is in Paris.",
    ...              [("gold", "paris"), ("A", "Eiffel Tower"), ("B", "Rome"), ("C", ""), ("D", None)])
    [(23, 28, 'gold'), (4, 16, 'A')]
    """
    spans = []
    for label, text in answers:
        text = (text or "").strip()
        if not text:
            continue
        m = re.search(re.escape(text), context, flags=re.IGNORECASE)
        if m:
            spans.append((m.start(), m.end(), label))
    return spans


def highlight_segments(context: str, spans) -> list[tuple[str, tuple[str, ...]]]:
    """Cut ``context`` at every span boundary: ``(text, labels covering it)`` in order, so
    overlapping answers (an agent giving the gold span) can be drawn together.

    >>> highlight_segments("abcdef", [(1, 4, "gold"), (2, 3, "A")])
    [('a', ()), ('b', ('gold',)), ('c', ('gold', 'A')), ('d', ('gold',)), ('ef', ())]
    >>> highlight_segments("abc", [])
    [('abc', ())]
    """
    cuts = sorted({0, len(context), *(s for s, _, _ in spans), *(e for _, e, _ in spans)})
    out = []
    for a, b in zip(cuts, cuts[1:]):
        labels = tuple(dict.fromkeys(lab for s, e, lab in spans if s <= a and b <= e))
        out.append((context[a:b], labels))
    return out


def md_plain(text: str) -> str:
    """Escape ``text`` (HTML entities) so that markdown shows it verbatim: no tags, no emphasis,
    no math from a ``$`` in a question or context.

    >>> md_plain("<b>$5</b>")
    '&lt;b&gt;&#36;5&lt;/b&gt;'
    """
    return html.escape(text, quote=False).translate(_MARKDOWN_SAFE)


def context_html(context: str, labelled, colors: dict[str, str]) -> tuple[str, list[str]]:
    """The context as HTML with each labelled answer ``(label, text)`` in a ``<mark>`` of its
    colour (overlaps drawn as stacked bands), and the labels whose answer was not found."""
    spans = answer_spans(context, labelled)
    found = {lab for _, _, lab in spans}
    missing = list(dict.fromkeys(lab for lab, text in labelled if (text or "").strip() and lab not in found))
    out = []
    for text, labels in highlight_segments(context, spans):
        if not labels:
            out.append(md_plain(text))
            continue
        cols = [colors.get(lab, "#e0e0e0") for lab in labels]
        bands = ", ".join(
            f"{c} {100 * k / len(cols):.0f}% {100 * (k + 1) / len(cols):.0f}%" for k, c in enumerate(cols)
        )
        title = html.escape(" + ".join(labels), quote=True)
        out.append(
            f'<mark title="{title}" style="background: linear-gradient(to bottom, {bands}); '
            f'padding: 0 1px; border-radius: 2px">{md_plain(text)}</mark>'
        )
    return "".join(out), missing


def legend_html(colors: dict[str, str]) -> str:
    """Colour chips naming each highlighted label."""
    chip = '<mark style="background: {}; padding: 0 4px; border-radius: 2px">{}</mark>'
    return " ".join(chip.format(c, html.escape(lab)) for lab, c in colors.items())
