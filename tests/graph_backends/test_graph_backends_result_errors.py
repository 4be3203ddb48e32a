"""What the model is told when a graph job's result cannot come back: the real cause (a value
without a JSON form, a result too large, a limit that stopped the job while it wrote), never
"the code overwrote the job's result file" unless the code did."""

from __future__ import annotations

import pytest

from kgot.errors import CodeExecutionError, QueryError
from kgot.graph_backends import open_backend
from kgot.tests.graph_backends.graph_fixtures import people_graph


@pytest.fixture
def networkx_backend(sandbox):
    return open_backend("networkx", sandbox, people_graph(), timeout_s=30)


@pytest.mark.slow
def test_a_result_without_a_json_form_is_named(networkx_backend):
    with pytest.raises(QueryError) as raised:
        networkx_backend.query("result = 10 ** 5000")
    message = str(raised.value)
    assert message.startswith("the result cannot be stored as JSON: it holds an integer of over")
    assert "return str(n)" in message
    assert "overwrote" not in message


@pytest.mark.slow
@pytest.mark.parametrize("method", ["query", "propose"])
def test_a_result_larger_than_a_job_may_write_is_named(networkx_backend, method):
    """The sandbox's file size limit (64 MB by default) stops the result file."""
    code = (
        "result = 'x' * 70_000_000"
        if method == "query"
        else "G.nodes['ada']['notes'] = 'x' * 70_000_000"
    )
    with pytest.raises((QueryError, CodeExecutionError)) as raised:
        getattr(networkx_backend, method)(code)
    message = str(raised.value)
    assert message.startswith("the result is too large to return (70.0 MB as JSON"), message
    assert "return less data" in message
    assert networkx_backend.stats().nodes == 4


@pytest.mark.slow
def test_a_job_stopped_after_starting_its_result_is_reported_by_how_it_ended(sandbox):
    """Half a result file and a timeout: the timeout is the cause."""
    code = (
        "import os\n"
        "open(os.path.abspath('out/result.json'), 'w').write('{')\n"
        "while True:\n"
        "    pass\n"
    )
    slow = open_backend("networkx", sandbox, people_graph(), timeout_s=2)
    with pytest.raises(CodeExecutionError, match="did not finish in time") as raised:
        slow.propose(code)
    assert "overwrote" not in str(raised.value)


@pytest.mark.slow
def test_a_result_the_code_replaced_is_still_named_so(networkx_backend):
    garbage = "import os\nopen(os.path.abspath('out/result.json'), 'w').write('{')\nos._exit(0)"
    with pytest.raises(CodeExecutionError, match="overwrote the job's result file"):
        networkx_backend.propose(garbage)
