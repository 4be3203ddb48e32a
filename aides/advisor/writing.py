"""What the model writes for one user: a briefing or an answer, every statement citing the
evidence pack, checked before anyone reads it.

The prompt holds the user's profile and holdings (this user's only: these are the only steps
that see user data) and the evidence pack (:mod:`kgot.aides.advisor.evidence`). The model
cites facts by their pack ids in square brackets (``[node:aapl]``, ``[edge:fed-affects->tlt]``,
``[price:AAPL]``; several as ``[node:a, node:b]``).

:func:`check_citations` is the validator: every statement (a sentence, or a line of a list)
must cite at least one id, and every cited id must be in the pack. A draft that fails goes back
to the model with its problems, at most :data:`MAX_FIXES` times; what still fails after that is
left out (the result says how many statements were dropped), and a draft with nothing left is
refused. The footer (:data:`DISCLAIMER`) is added by kgot, never by the model, and so is the
line before it that dates every price the text cites (``Prices cited (daily closes): AAPL 189.5
as of 2026-11-20``): a cached close may be days old, and a reader must see from when.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from kgot.errors import KgotError

if TYPE_CHECKING:
    from kgot.aides.advisor.advisor_rows import Portfolio
    from kgot.aides.advisor.evidence import EvidencePack

BRIEFING_STEP = "advisor_briefing"
ASK_STEP = "advisor_ask"
MAX_FIXES = 2
DISCLAIMER = (
    "Not investment advice: this restates facts kept in kgot's knowledge graph and prices "
    "from your advisor's market data; it is not a recommendation to buy or sell. Check the "
    "cited sources and your own circumstances, or ask a licensed adviser."
)
_BRACKETS = re.compile(r"\[([^\[\]\n]+)\]")
_ID = re.compile(r"^(?:node|edge|price):\S+$")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")
_LIST_MARK = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")

_BRIEFING_SYSTEM = (
    "You write a short daily briefing for one investor about what matters for their holdings "
    "and watchlist, from the evidence below only. Start with their holdings, most important "
    "first; then the watchlist. At most 8 bullet points of one or two sentences. Every "
    "sentence must cite the evidence it rests on by its id in square brackets, exactly as "
    "shown (e.g. [node:aapl] or [edge:fed-affects->tlt] or [price:AAPL]); cite only ids "
    "listed in the evidence. A price is as of the day its evidence line gives: say that day "
    "with it (e.g. 'AAPL closed at 189.5 on 2026-11-20'). Do not invent facts, prices or "
    "recommendations the evidence does not state, and do not add a disclaimer (one is added "
    "for you). Reply with the bullet points only."
)
_ASK_SYSTEM = (
    "You answer one investor's question from the evidence below only, in a few sentences. "
    "Every sentence must cite the evidence it rests on by its id in square brackets, exactly "
    "as shown (e.g. [node:aapl]); cite only ids listed in the evidence. A price is as of the "
    "day its evidence line gives: say that day with it. When the evidence does "
    "not answer the question, say so in one sentence citing the closest evidence. Do not "
    "invent facts or give personal recommendations, and do not add a disclaimer."
)


class WritingFailed(KgotError):
    """The model's drafts never cited the evidence properly, and nothing usable was left."""

    exit_code = 1


@dataclass
class Written:
    """A checked briefing or answer."""

    text: str  # the model's text (invalid statements removed), without the footer
    cited: list[str] = field(default_factory=list)  # ids cited, all in the pack, in order
    drafts: int = 1
    dropped: int = 0  # statements left out because they never cited the pack properly
    problems: list[str] = field(default_factory=list)  # of the last draft

    def with_footer(self, prices: Sequence[str] = ()) -> str:
        """The text as a reader gets it: the prices it cites with their days (``prices``:
        :meth:`EvidencePack.prices_as_of`; kgot adds them, so a price is never shown undated
        whatever the model wrote) and the disclaimer."""
        dated = f"\n\nPrices cited (daily closes): {'; '.join(prices)}." if prices else ""
        return f"{self.text}{dated}\n\n— {DISCLAIMER}"


def cited_ids(text: str) -> list[str]:
    """The ids cited in ``text``, in order, each once."""
    found: list[str] = []
    for inside in _BRACKETS.findall(text):
        for part in re.split(r"[,;]\s*", inside):
            if _ID.match(part.strip()):
                found.append(part.strip())
    return list(dict.fromkeys(found))


def statements(text: str) -> list[str]:
    """The statements of ``text``: each sentence of each non-empty line (a section title, a
    short line ending in ``:`` or starting with ``#``, is not a statement)."""
    found: list[str] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or (line.endswith(":") and len(line) <= 60):
            continue
        line = _LIST_MARK.sub("", line)
        found.extend(part.strip() for part in _SENTENCE_END.split(line) if part.strip())
    return found


def check_citations(text: str, pack_ids: Collection[str]) -> list[str]:
    """What is wrong with a draft: statements citing nothing, ids not in the pack."""
    problems: list[str] = []
    allowed = set(pack_ids)
    unknown = [i for i in cited_ids(text) if i not in allowed]
    for found in unknown:
        problems.append(f"[{found}] is not an id of the evidence; cite only the ids listed")
    for statement in statements(text):
        if not cited_ids(statement):
            shown = statement if len(statement) <= 80 else statement[:79] + "…"
            problems.append(f"this statement cites nothing: {shown!r}")
    if not statements(text):
        problems.append("the reply is empty")
    return problems


def _kept(text: str, pack_ids: Collection[str]) -> tuple[str, int]:
    """``text`` without the statements that cite nothing or cite outside the pack."""
    allowed = set(pack_ids)
    lines: list[str] = []
    dropped = 0
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#") or (line.endswith(":") and len(line) <= 60):
            lines.append(line)
            continue
        mark = _LIST_MARK.match(line)
        body = _LIST_MARK.sub("", line)
        parts = [p.strip() for p in _SENTENCE_END.split(body) if p.strip()]
        good = [p for p in parts if cited_ids(p) and all(i in allowed for i in cited_ids(p))]
        dropped += len(parts) - len(good)
        if good:
            lines.append((mark.group(0) if mark else "") + " ".join(good))
    return "\n".join(lines), dropped


def profile_text(portfolio: Portfolio) -> str:
    """The user's profile and holdings as the prompt shows them."""
    user = portfolio.user
    lines = [f"Investor: {user.name}; risk tolerance {user.risk}"]
    if user.horizon:
        lines[0] += f"; horizon {user.horizon}"
    if user.goals:
        lines.append(f"Goals: {', '.join(user.goals)}")
    if user.preferences:
        lines.append(f"Preferences: {', '.join(user.preferences)}")
    if portfolio.positions:
        held = []
        for position in portfolio.positions:
            cost = (
                f" at {position.avg_cost:g} average cost" if position.avg_cost is not None else ""
            )
            held.append(f"{position.symbol} {position.shares:g} shares{cost}")
        lines.append(f"Holdings: {'; '.join(held)}")
    else:
        lines.append("Holdings: none")
    lines.append(f"Watchlist: {', '.join(portfolio.watched) or 'none'}")
    return "\n".join(lines)


async def write_checked(
    planning: Any,
    messages: Sequence[BaseMessage],
    pack_ids: Collection[str],
    *,
    step: str,
) -> Written:
    """Ask for a draft, check it, send problems back (at most :data:`MAX_FIXES` times),
    and leave out what still fails.

    Raises:
        WritingFailed: no statement of the last draft cites the evidence properly.
    """
    conversation = list(messages)
    draft = ""
    problems: list[str] = []
    for attempt in range(1, MAX_FIXES + 2):
        draft = (await planning.text(conversation, step=step)).strip()
        problems = check_citations(draft, pack_ids)
        if not problems:
            return Written(text=draft, cited=cited_ids(draft), drafts=attempt)
        conversation += [
            AIMessage(draft),
            HumanMessage(
                "Your reply cannot be used yet:\n"
                + "\n".join(f"- {p}" for p in problems[:12])
                + "\nWrite it again: every sentence cites one or more ids from the evidence, "
                "in square brackets, and only those ids."
            ),
        ]
    kept, dropped = _kept(draft, pack_ids)
    if not statements(kept):
        raise WritingFailed(
            f"the model did not write a text citing only the evidence after {MAX_FIXES + 1} "
            f"drafts ({problems[0] if problems else 'no statements'})"
        )
    return Written(
        text=kept, cited=cited_ids(kept), drafts=MAX_FIXES + 1, dropped=dropped, problems=problems
    )


def briefing_messages(portfolio: Portfolio, pack: EvidencePack, now: datetime) -> list[BaseMessage]:
    return [
        SystemMessage(_BRIEFING_SYSTEM),
        HumanMessage(
            f"{profile_text(portfolio)}\nToday: {now.date().isoformat()}\n\n"
            f"Evidence (cite by id):\n{pack.render()}"
        ),
    ]


def ask_messages(
    portfolio: Portfolio, pack: EvidencePack, question: str, now: datetime
) -> list[BaseMessage]:
    return [
        SystemMessage(_ASK_SYSTEM),
        HumanMessage(
            f"{profile_text(portfolio)}\nToday: {now.date().isoformat()}\n\n"
            f"Evidence (cite by id):\n{pack.render()}\n\nQuestion: {question}"
        ),
    ]
