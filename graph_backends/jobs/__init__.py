"""Code that runs *inside* the sandbox on behalf of the graph backends.

These modules import only the standard library, networkx, pyoxigraph, each other (relatively),
:mod:`kgot.graph_model.records` (the record format and value rules, standard library only) and
:mod:`kgot.graph_model.nx_fast` (NetworkX's internal tables, reached in one place), so the host
can ship them into a job as one zip file (``kgotjob.zip``, see :mod:`kgot.graph_backends.runner`,
which adds those two under their own names) and the same code
is importable on the host for tests and for sharing the property-graph mapping. Nothing else of
kgot may be imported here (an import-linter contract holds this).
"""
