"""The KGoT reasoning loop on LangGraph.

Entry points: :func:`ask` / :func:`ask_async` answer a question; :func:`resume` /
:func:`resume_async` continue an interrupted run (typed keyword arguments:
:mod:`kgot.controller.api`, docs/python.md); :func:`build_controller_graph` gives the
compiled LangGraph for inspection; :func:`clean_up_after_dead_runs` records runs whose process
was killed as interrupted and removes what they left in the temporary directory.

For the packages above it, the controller's INSERT path (:class:`Ingestor`,
:mod:`kgot.controller.ingest`), recorded runs (:class:`RecordedRun`, :func:`traced_step`), the
run's state records, its signal handling and :func:`open_entity_backend` (an entity's graph
for graph code: the whole entity, or a working set of a large one) are named here too.
"""

from kgot.controller.api import ask, ask_async, resume, resume_async
from kgot.controller.graph import build_controller_graph, recursion_limit, run_config
from kgot.controller.ingest import (
    Ingestor,
    IngestReport,
    TextTooLongError,
    check_ingestion,
    split_text,
)
from kgot.controller.recorded_run import RecordedRun, traced_step
from kgot.controller.result import AskResult
from kgot.controller.run import clean_up_after_dead_runs, is_resumable, otel_sink
from kgot.controller.signals import RunTerminated, stopped_by_termination
from kgot.controller.state import PendingResult, RunState, ToolCallRecord
from kgot.controller.working_set import open_entity_backend

__all__ = [
    "AskResult",
    "IngestReport",
    "Ingestor",
    "PendingResult",
    "RecordedRun",
    "RunState",
    "RunTerminated",
    "TextTooLongError",
    "ToolCallRecord",
    "ask",
    "ask_async",
    "build_controller_graph",
    "check_ingestion",
    "clean_up_after_dead_runs",
    "is_resumable",
    "open_entity_backend",
    "otel_sink",
    "recursion_limit",
    "resume",
    "resume_async",
    "run_config",
    "split_text",
    "stopped_by_termination",
    "traced_step",
]
