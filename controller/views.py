"""How the graph is shown in prompts."""

from __future__ import annotations

from collections.abc import Sequence

from kgot.controller.context import RunContext
from kgot.controller.trust import FactLens
from kgot.graph_backends import ViewRequest


def graph_view(ctx: RunContext, question: str, focus: Sequence[str] = ()) -> str:
    """The relevant part of the graph within the configured token budget, with a note of what
    was left out. In an entity run facts are ranked and marked by their trust and age
    (:mod:`kgot.controller.trust`)."""
    view = ctx.backend.render(
        ViewRequest(
            question=question,
            token_budget=ctx.settings.controller.graph_token_budget,
            focus=tuple(focus),
            lens=fact_lens(ctx),
        )
    )
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
