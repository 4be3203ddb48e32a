"""What a user waits for besides the model, and what the controller itself costs.

Run: ``python -m kgot.benchmarks.perf_controller`` (``--quick`` for fewer rounds, ``--json``
for JSON lines). Every figure uses a zero-latency scripted model. It reports:

* overhead per question: a whole question (7 INSERT rounds on an empty graph, then the forced
  solution) from the call of ``ask_async`` to its return, minus the model calls: opening the
  store and the sandbox, starting the run's own worker (and the shared pool behind it), every
  sandbox job, closing (target ≤ 600 ms);
* graph-code execution per update: one update's code as the controller sends it
  (``backend.apropose``: the run's resident worker brought up to date, the job, its changeset
  checked), both backends at 10, 2,000 and 10,000 nodes (target ≤ 10 ms at 10,000); at
  10,000 nodes also with the graph sent with every job (``sandbox.resident_graph = false``);
* overhead per iteration (wall − model): an INSERT round's wall time minus its model calls,
  sandbox jobs included, over graphs of 10, 2,000 and 10,000 nodes started from a file
  (target ≤ 15 ms at every size); the shared pool is warm before these runs start, and the
  first round (which waits for the run's own worker) is left out;
* … the controller's own part: the same minus the sandbox jobs — prompt building, graph
  views, changeset checks, checkpoints, the tool runner and LangGraph bookkeeping (target
  ≤ 5 ms at 2,000 nodes) — and once more on a 2,000-node entity graph where every changeset
  is also validated and committed to the store; a further figure counts the LLM layer's own
  time (LangChain and kgot's client around the zero-latency model) as overhead too. Each is
  the median over the measured rounds of three questions (one with ``--quick``);
* LLM calls per question;
* LangGraph's floor on this machine: an INSERT round's two steps as no-op nodes over the same
  state type with the same SQLite checkpoints, i.e. what any controller built this way pays
  before doing any work (machines differ by 2x and more, so compare the overhead with it);
* the wall time of one round of 5 votes when every model call takes 500 ms: votes run
  concurrently, so the round should take about one call, not five.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kgot.benchmarks.figures import Figure, print_figures
from kgot.config import Settings, load_settings
from kgot.graph_model import Changeset, Edge, Node
from kgot.llm import ScriptedCall, ScriptedChatModel
from kgot.persistence import Provenance, open_store

AREA = "controller"
INSERT_ROUNDS = 5
# Questions asked per figure: the figure is the median over all their measured rounds (one
# question gives only four, and a single garbage collection or scheduler hiccup moves it).
QUESTIONS = 3
VOTE_LATENCY_S = 0.5
GRAPH_SIZES = (10, 2000, 10_000)
QUESTION_ROUNDS = 7  # INSERT rounds before the forced solution, as in the reference comparison
QUESTION_TARGET_MS = 600.0
ITERATION_TARGET_MS = 15.0
UPDATE_TARGET_MS = 10.0
UPDATE_REPEATS = 15
_Interval = tuple[float, float]


def run(quick: bool = False, sandbox: str = "auto") -> list[Figure]:
    rounds = 3 if quick else INSERT_ROUNDS
    questions = 1 if quick else QUESTIONS
    figures: list[Figure] = []
    with tempfile.TemporaryDirectory(prefix="kgot-perf-controller-") as tmp:
        figures.append(
            Figure(
                AREA,
                f"overhead per question ({QUESTION_ROUNDS} rounds, empty graph)",
                _question_overhead(Path(tmp), sandbox, repeats=1 if quick else 3),
                "ms",
                QUESTION_TARGET_MS,
            )
        )
        figures += _update_figures(sandbox, repeats=5 if quick else UPDATE_REPEATS)
        for nodes in GRAPH_SIZES:
            own, with_llm, calls, wall = _overhead(
                Path(tmp), nodes, rounds, questions, entity=False, sandbox=sandbox
            )
            target = 5.0 if nodes == 2000 else None
            figures += [
                Figure(
                    AREA,
                    f"overhead per iteration (wall − model), {nodes:,} nodes",
                    wall,
                    "ms",
                    ITERATION_TARGET_MS,
                ),
                Figure(AREA, f"  … the controller's own, {nodes:,} nodes", own, "ms", target),
                Figure(AREA, f"  … with the LLM layer's own time, {nodes:,} nodes", with_llm, "ms"),
                Figure(AREA, f"LLM calls per question, {nodes:,} nodes", calls, "calls"),
            ]
        figures.append(
            Figure(
                AREA,
                "LangGraph floor: 2 no-op steps with SQLite checkpoints",
                _langgraph_floor(Path(tmp)),
                "ms",
            )
        )
        own, with_llm, _, _ = _overhead(
            Path(tmp), 2000, rounds, questions, entity=True, sandbox=sandbox
        )
        figures += [
            Figure(AREA, "overhead per iteration, 2,000-node entity", own, "ms"),
            Figure(AREA, "  … with the LLM layer's own time, 2,000-node entity", with_llm, "ms"),
        ]
        figures.append(
            Figure(
                AREA,
                "vote round of 5 at 500 ms per call",
                _measure_vote_round(Path(tmp), sandbox),
                "ms",
                target=VOTE_LATENCY_S * 1000 * 1.5,
            )
        )
    return figures


def _settings(tmp: Path, name: str, sandbox: str, **controller: Any) -> Settings:
    overrides: dict[str, Any] = {
        "store.db": str(tmp / f"{name}.db"),
        "llm.model": "scripted",
        "sandbox.kind": sandbox,
    }
    overrides.update({f"controller.{key}": value for key, value in controller.items()})
    return load_settings(overrides, environ={})


def _seed(nodes: int) -> Changeset:
    things = tuple(
        Node(f"n{i}", "Thing", {"name": f"item {i}", "description": f"seed fact number {i}"})
        for i in range(nodes)
    )
    links = tuple(
        Edge(f"n{i}", f"n{(i * 7 + 1) % nodes}", "related_to") for i in range(nodes) if nodes > 1
    )
    return Changeset(added_nodes=things, added_edges=links)


def _seed_entity(settings: Settings, entity: str, nodes: int) -> None:
    with open_store(settings.store.db) as store:
        store.create_entity(entity)
        store.session(entity).commit(_seed(nodes), Provenance(run_id="seed", step="benchmark"))


def _seed_file(path: Path, nodes: int) -> Path:
    import networkx as nx

    from kgot.graph_backends import write_graph
    from kgot.graph_model import apply_to_networkx

    graph = nx.MultiDiGraph()
    apply_to_networkx(graph, _seed(nodes))
    write_graph(graph, path)
    return path


def _script(rounds: int, votes: int) -> ScriptedChatModel:
    def decide(call: ScriptedCall) -> dict[str, str]:
        decision = "INSERT" if call.number <= rounds * votes else "RETRIEVE"
        return {"decision": decision, "reason": "measure"}

    def tool_call(call: ScriptedCall) -> dict[str, Any]:
        prompt = f"fact {call.number}"  # distinct, so no call is skipped as a duplicate
        return {"$tool_calls": [{"name": "llm_query", "args": {"query": prompt}}]}

    def code(call: ScriptedCall) -> str:
        return (
            "```python\n"
            f"G.add_node('fact{call.number}', label='Thing', name='fact {call.number}')\n"
            "```"
        )

    return ScriptedChatModel(
        script={
            "decide": [decide],
            "define_tool_calls": [tool_call],
            "llm_query": ["a short answer"],
            "update_graph": [code],
            "query": ["```python\nresult = sorted(G.nodes)[:3]\n```"],
            "math_check": [{"needs_math": False, "reason": "none"}],
            "solve": [{"answer": "done", "reasoning": "benchmark"}],
        }
    )


class _Timed:
    """Records when calls to some async methods of a class ran (patched in for one run)."""

    def __init__(self, cls: type, names: Sequence[str], intervals: list[_Interval]) -> None:
        self._cls = cls
        self._originals = {name: getattr(cls, name) for name in names}
        self._intervals = intervals

    def __enter__(self) -> None:
        for name, original in self._originals.items():
            setattr(self._cls, name, self._timed(original))

    def __exit__(self, *exc_info: object) -> None:
        for name, original in self._originals.items():
            setattr(self._cls, name, original)

    def _timed(self, original: Any) -> Any:
        intervals = self._intervals

        async def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return await original(*args, **kwargs)
            finally:
                intervals.append((started, time.perf_counter()))

        return timed


class _TimedSandbox:
    """Wraps the real sandbox and records when its jobs ran."""

    def __init__(self, inner: Any, intervals: list[_Interval]) -> None:
        self._inner = inner
        self._intervals = intervals
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self._inner.name

    def run(self, job: Any) -> Any:
        started = time.perf_counter()
        try:
            return self._inner.run(job)
        finally:
            with self._lock:
                self._intervals.append((started, time.perf_counter()))

    async def arun(self, job: Any) -> Any:
        from kgot.sandbox import run_async

        started = time.perf_counter()
        try:
            return await run_async(self._inner, job)
        finally:
            with self._lock:
                self._intervals.append((started, time.perf_counter()))

    def close(self) -> None:
        self._inner.close()

    def open_resident(self, preload: tuple[str, ...]) -> Any:
        """The run's own worker, its jobs and state updates timed like the pool's jobs."""
        worker = self._inner.open_resident(preload)
        if worker is None:
            return None
        for name in ("run_with_state", "set_state"):
            setattr(worker, name, self._timed(getattr(worker, name)))
        return worker

    def _timed(self, call: Any) -> Any:
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return call(*args, **kwargs)
            finally:
                with self._lock:
                    self._intervals.append((started, time.perf_counter()))

        return timed

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self._inner, attribute)


def _overhead(
    tmp: Path, nodes: int, rounds: int, questions: int, *, entity: bool, sandbox: str
) -> tuple[float, float, float, float]:
    """The median INSERT-round overhead in ms over ``questions`` questions (without model calls
    and sandbox jobs; then with the LLM layer's own time), LLM calls per question, and the
    median round's wall time minus its model calls (what a user waits for besides the
    model)."""
    own: list[float] = []
    with_llm: list[float] = []
    wall: list[float] = []
    calls = 0.0
    for number in range(questions):
        question_own, question_with_llm, calls, question_wall = _measure_overhead(
            tmp / f"q{number}", nodes, rounds, entity=entity, sandbox=sandbox
        )
        own += question_own
        with_llm += question_with_llm
        wall += question_wall
    return statistics.median(own), statistics.median(with_llm), calls, statistics.median(wall)


def _measure_overhead(
    tmp: Path, nodes: int, rounds: int, *, entity: bool, sandbox: str
) -> tuple[list[float], list[float], float, list[float]]:
    """One question over ``nodes`` nodes, on an entity graph (changesets committed to the
    store) or an ephemeral one (started from a graph file).

    Returns each measured INSERT round's overhead in ms without model calls and sandbox jobs,
    the same with the LLM layer's own time counted as overhead, the number of LLM calls, and
    each round's wall time minus its model calls.
    """
    tmp.mkdir(parents=True, exist_ok=True)
    import kgot.sandbox
    from kgot.controller import ask_async
    from kgot.llm import LLMClient

    name = f"overhead-{nodes}-{'entity' if entity else 'ephemeral'}"
    settings = _settings(tmp, name, sandbox, max_iterations=rounds + 2)
    where: dict[str, Any] = {}
    if entity:
        _seed_entity(settings, "bench", nodes)
        where["entity"] = "bench"
    else:
        where["graph_file"] = _seed_file(tmp / f"{name}.json", nodes)
    model = _script(rounds, settings.controller.votes)
    sandbox_intervals: list[_Interval] = []
    llm_intervals: list[_Interval] = []
    marks: list[tuple[str, float]] = []
    real_open = kgot.sandbox.open_sandbox

    def timed_open(config: Any = None) -> Any:
        # Steady state: the shared pool warm before the run, not starting during its rounds
        # (the question's own figure above counts the warm-up).
        box = real_open(config)
        box.warm_up(wait=True)
        return _TimedSandbox(box, sandbox_intervals)

    kgot.sandbox.open_sandbox = timed_open  # type: ignore[assignment]
    try:
        with _Timed(LLMClient, ("text", "structured", "tool_calls"), llm_intervals):
            result = asyncio.run(
                ask_async(
                    "Benchmark question",
                    settings=settings,
                    models={"planning": model, "execution": model},
                    on_event=lambda event: marks.append((event.type, time.perf_counter())),
                    **where,
                )
            )
    finally:
        kgot.sandbox.open_sandbox = real_open  # type: ignore[assignment]
    if result.status != "answered":
        raise RuntimeError(f"benchmark run did not answer: {result.error}")
    vote_times = [stamp for kind, stamp in marks if kind == "votes"]
    # The first round also waits for the sandbox's warm workers to start: not counted.
    rounds_measured = list(itertools.pairwise(vote_times[: rounds + 1]))[1:]
    without_models, with_llm_layer, wall = [], [], []
    for start, end in rounds_measured:
        in_sandbox = _covered(sandbox_intervals, start, end)
        either = _covered(sandbox_intervals + llm_intervals, start, end)
        without_models.append((end - start - either) * 1000)
        with_llm_layer.append((end - start - in_sandbox) * 1000)
        wall.append((end - start - _covered(llm_intervals, start, end)) * 1000)
    return without_models, with_llm_layer, float(result.llm_calls), wall


def _question_overhead(tmp: Path, sandbox: str, repeats: int) -> float:
    """Median ms a whole question costs besides its model calls: :data:`QUESTION_ROUNDS`
    INSERT rounds on an empty ephemeral graph, then the forced solution; from the call of
    ``ask_async`` to its return (opening the store and the sandbox, starting workers,
    closing them), with a zero-latency model."""
    from kgot.controller import ask_async
    from kgot.llm import LLMClient

    results: list[float] = []
    for _ in range(repeats):
        # One store for all (as on a user's machine, where it exists after the first use).
        settings = _settings(tmp, "questions", sandbox, max_iterations=QUESTION_ROUNDS)
        model = _script(QUESTION_ROUNDS + 1, settings.controller.votes)
        llm_intervals: list[_Interval] = []
        with _Timed(LLMClient, ("text", "structured", "tool_calls"), llm_intervals):
            started = time.perf_counter()
            result = asyncio.run(
                ask_async(
                    "Benchmark question",
                    settings=settings,
                    models={"planning": model, "execution": model},
                )
            )
            ended = time.perf_counter()
        if result.status != "forced":  # the iteration limit forces the solution
            raise RuntimeError(f"benchmark run did not answer: {result.error}")
        results.append((ended - started - _covered(llm_intervals, started, ended)) * 1000)
    return statistics.median(results)


def _update_figures(sandbox: str, repeats: int) -> list[Figure]:
    """Median ms of one graph update's code run in the sandbox, as the controller sends it
    (``apropose``: the resident worker brought up to date, the job, its changeset checked),
    per backend and graph size; at the largest size also with the graph sent with every job
    (``sandbox.resident_graph = false``), the way before resident graphs."""
    figures: list[Figure] = []
    for backend in ("networkx", "rdf"):
        for nodes in GRAPH_SIZES:
            figures.append(
                Figure(
                    AREA,
                    f"graph-code execution per update, {backend}, {nodes:,} nodes",
                    _update_time(backend, nodes, sandbox, repeats, resident=True),
                    "ms",
                    UPDATE_TARGET_MS if nodes == GRAPH_SIZES[-1] else None,
                )
            )
        largest = GRAPH_SIZES[-1]
        figures.append(
            Figure(
                AREA,
                f"  … graph sent with every job, {backend}, {largest:,} nodes",
                _update_time(backend, largest, sandbox, max(3, repeats // 3), resident=False),
                "ms",
            )
        )
    return figures


def _update_time(backend: str, nodes: int, sandbox: str, repeats: int, *, resident: bool) -> float:
    import networkx as nx

    from kgot.config import SandboxSettings
    from kgot.graph_backends import open_backend
    from kgot.graph_model import apply_to_networkx
    from kgot.sandbox import open_sandbox

    graph = nx.MultiDiGraph()
    apply_to_networkx(graph, _seed(nodes))
    box = open_sandbox(SandboxSettings(kind=sandbox, resident_graph=resident))  # type: ignore[arg-type]
    try:
        store = open_backend(backend, box, graph)
        first = "result = 0" if backend == "networkx" else "ASK { ?s ?p ?o }"
        store.query(first)  # starts the workers and, for a resident graph, loads it
        times: list[float] = []

        async def updates() -> None:
            for number in range(repeats):
                if backend == "networkx":
                    code = f"G.add_node('u{number}', label='Thing', name='update {number}')"
                else:
                    code = f'INSERT DATA {{ node:u{number} a type:Thing ; prop:name "u{number}" }}'
                started = time.perf_counter()
                change = await store.apropose(code)
                times.append((time.perf_counter() - started) * 1000)
                store.apply(change)

        asyncio.run(updates())
        store.close()
        return statistics.median(times)
    finally:
        box.close()


def _covered(intervals: Sequence[_Interval], start: float, end: float) -> float:
    """Seconds of [start, end] covered by the union of ``intervals``."""
    clipped = sorted((max(a, start), min(b, end)) for a, b in intervals if b > start and a < end)
    total = 0.0
    current_start, current_end = None, None
    for a, b in clipped:
        if current_end is None or a > current_end:
            if current_end is not None and current_start is not None:
                total += current_end - current_start
            current_start, current_end = a, b
        else:
            current_end = max(current_end, b)
    if current_end is not None and current_start is not None:
        total += current_end - current_start
    return total


def _langgraph_floor(tmp: Path, rounds: int = 40, repeats: int = 5) -> float:
    """Median ms per round of two no-op steps shaped like an INSERT round (same state type,
    similar updates, routing by ``Command``, a checkpoint after every step)."""
    from langchain_core.runnables import RunnableConfig
    from langgraph.graph import StateGraph
    from langgraph.types import Command

    from kgot.controller import PendingResult, RunState, ToolCallRecord
    from kgot.persistence import open_checkpointer

    async def decide(state: RunState) -> Command[Any]:
        iteration = state.get("iteration", 0) + 1
        if iteration > rounds:
            return Command(update={"iteration": iteration}, goto="__end__")
        record = ToolCallRecord(
            name="t", args={}, ok=True, iteration=1, source_ref=None, summary="s"
        )
        pending = [PendingResult(name="t", args={}, output="o", source_ref=None)]
        update = {
            "iteration": iteration,
            "decision": "INSERT",
            "missing": ["m"],
            "tool_history": [record],
            "pending_results": pending,
        }
        return Command(update=update, goto="update_graph")

    async def update_graph(state: RunState) -> Command[Any]:
        change = {"added_nodes": [{"id": "n", "label": "Thing", "properties": {}}]}
        return Command(update={"pending_results": [], "changesets": [change]}, goto="decide")

    async def measure() -> list[float]:
        builder = StateGraph(RunState)
        builder.add_node("decide", decide, destinations=("update_graph", "__end__"))
        builder.add_node("update_graph", update_graph, destinations=("decide",))
        builder.set_entry_point("decide")
        per_round: list[float] = []
        async with open_checkpointer(str(tmp / "floor.db")) as saver:
            graph = builder.compile(checkpointer=saver)
            for repeat in range(repeats):
                config: RunnableConfig = {
                    "configurable": {"thread_id": f"floor-{repeat}"},
                    "recursion_limit": 999,
                }
                started = time.perf_counter()
                async for _ in graph.astream(
                    {"question": "q"}, config, durability="sync", stream_mode="updates"
                ):
                    pass
                per_round.append((time.perf_counter() - started) / rounds * 1000)
        return per_round

    return statistics.median(asyncio.run(measure()))


def _measure_vote_round(tmp: Path, sandbox: str) -> float:
    from kgot.controller import ask_async
    from kgot.tracing import TraceEvent

    settings = _settings(tmp, "votes", sandbox, max_iterations=1)
    model = ScriptedChatModel(
        script={
            "decide": [{"decision": "RETRIEVE", "reason": "measure"}],
            "query": ["```python\nresult = 'x'\n```"],
            "math_check": [{"needs_math": False, "reason": "none"}],
            "solve": [{"answer": "x", "reasoning": "-"}],
        },
        latency_s=VOTE_LATENCY_S,
    )
    marks: dict[str, float] = {}

    def mark(event: TraceEvent) -> None:
        marks.setdefault(event.type, time.perf_counter())  # the first of each kind

    asyncio.run(
        ask_async(
            "Benchmark question",
            settings=settings,
            models={"planning": model, "execution": model},
            on_event=mark,
        )
    )
    return (marks["votes"] - marks["run_started"]) * 1000


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    parser.add_argument("--json", action="store_true", help="JSON lines instead of a table")
    args = parser.parse_args(argv)
    print_figures(run(quick=args.quick), as_json=args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
