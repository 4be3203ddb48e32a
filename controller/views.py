"""How the graph is shown in prompts."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from kgot.controller.context import RunContext
from kgot.controller.trust import FactLens
from kgot.graph_backends import GraphView, ViewRequest


async def graph_view(ctx: RunContext, question: str, focus: Sequence[str] = ()) -> str:
    """The relevant part of the graph within the configured token budget, with a note of what
    was left out. In an entity run facts are ranked and marked by their trust and age
    (:mod:`kgot.controller.trust`).

    Rendered on a thread: an entity run's view reads the store (the fact lens's metadata, a
    working set's searches of the focus texts), which must not hold up the event loop that
    other runs and an MCP server's other tenants share."""

    def render() -> GraphView:
        request = ViewRequest(
            question=question,
            token_budget=ctx.settings.controller.graph_token_budget,
            focus=tuple(focus),
            lens=fact_lens(ctx),
        )
        return ctx.backend.render(request)

    view = await asyncio.to_thread(render)
    if view.nodes_total == 0:
        return "(the graph is empty)"
    return view.text


def fact_lens(ctx: RunContext) -> FactLens | None:
    """The run's lens on its entity's fact metadata, read on first use; ``None`` without an
    entity."""
    if ctx.session is None:
        return None
    if ctx.fact_lens is None:
        ctx.fact_lens = FactLens.load(ctx.session)
    return ctx.fact_lens
