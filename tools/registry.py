"""Which tools a run gets, and how ``kgot tools list`` describes them.

Listing does not import LangChain (the tools are only built as LangChain tools for a run), so
``kgot tools list`` stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from kgot.config import Settings, ToolsSettings
from kgot.errors import ConfigError, SandboxUnavailableError
from kgot.tools import file_tool, llm_query, python_tool, web_page, web_search, wikipedia
from kgot.tools.argument_schemas import arguments, explain_validation, signature
from kgot.tools.base import ToolContext, ToolInfo
from kgot.tools.spec import ToolSpec
from kgot.tools.tool_session import ToolSession

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool

SPECS: tuple[ToolSpec, ...] = (
    web_search.SPEC,
    web_page.SPEC,
    wikipedia.SPEC,
    file_tool.SPEC,
    python_tool.SPEC,
    llm_query.SPEC,
)
TOOL_NAMES = tuple(spec.name for spec in SPECS)
_BY_NAME = {spec.name: spec for spec in SPECS}


def argument_problem(name: str, args: dict[str, Any]) -> str | None:
    """Why ``args`` are not valid arguments of tool ``name`` (as a call would report it), or
    ``None`` when they are.

    Raises:
        KeyError: ``name`` is not a tool of the belt.
    """
    spec = _BY_NAME[name]
    try:
        spec.args_schema.model_validate(args)
    except ValidationError as error:
        return explain_validation(name, error, signature(spec.args_schema.model_json_schema()))
    return None


def check_names(settings: ToolsSettings) -> None:
    """Reject unknown names in ``tools.enabled`` / ``tools.disabled``.

    Raises:
        ConfigError: naming the unknown tool and listing the real ones.
    """
    for field, names in (("enabled", settings.enabled or []), ("disabled", settings.disabled)):
        unknown = [n for n in names if n not in TOOL_NAMES]
        if unknown:
            raise ConfigError(
                f"tools.{field} names unknown tool(s) {', '.join(unknown)}; "
                f"known tools: {', '.join(TOOL_NAMES)}"
            )


def configuration_reason(name: str, settings: ToolsSettings) -> str | None:
    """Why configuration turns tool ``name`` off, or ``None`` when it does not."""
    if name in settings.disabled:
        return "disabled by tools.disabled"
    if settings.enabled is not None and name not in settings.enabled:
        return "not listed in tools.enabled"
    return None


def build_tools(ctx: ToolContext) -> list[BaseTool]:
    """The enabled tools of one run, as LangChain tools sharing one session.

    A tool is left out when configuration disables it, or when the run lacks what it needs
    (the python tool without a sandbox, llm_query without a model).

    Raises:
        ConfigError: ``tools.enabled``/``tools.disabled`` name unknown tools.
    """
    check_names(ctx.settings)
    session = ToolSession(ctx)
    provided = {"sandbox": ctx.sandbox is not None, "llm": ctx.llm is not None}
    chosen = [
        spec
        for spec in SPECS
        if configuration_reason(spec.name, ctx.settings) is None
        and (spec.needs is None or provided[spec.needs])
    ]
    if any(spec.reads_documents for spec in chosen):
        session.converter.prewarm()  # overlap the parsers' imports with the first LLM calls
    return [spec.make(session) for spec in chosen]


def describe_tools(settings: Settings | ToolsSettings, *, probe: bool = True) -> list[ToolInfo]:
    """Every tool with its arguments and state, for ``kgot tools list``.

    Args:
        settings: the full settings (then whether a model and a sandbox are there is checked
            too), or only the ``[tools]`` section (configuration alone decides).
        probe: with full settings, check that the configured sandbox can start (a dry run).

    Raises:
        ConfigError: ``tools.enabled``/``tools.disabled`` name unknown tools.
    """
    full = settings if isinstance(settings, Settings) else None
    tools_settings = full.tools if full is not None else settings
    assert isinstance(tools_settings, ToolsSettings)
    check_names(tools_settings)
    missing = _missing_needs(full, probe=probe) if full is not None else {}
    infos = []
    for spec in SPECS:
        reason = configuration_reason(spec.name, tools_settings)
        lacking = missing.get(spec.needs) if spec.needs else None
        notes = spec.notes(full or Settings(tools=tools_settings)) if spec.notes else []
        infos.append(
            ToolInfo(
                name=spec.name,
                description=spec.description,
                arguments=arguments(spec.args_schema),
                enabled=reason is None and lacking is None,
                reason=reason or lacking,
                notes=tuple(notes),
                available=reason is not None or lacking is None,
            )
        )
    return infos


def _missing_needs(settings: Settings, *, probe: bool) -> dict[str, str]:
    """Why the run would lack a model or a sandbox, by need."""
    missing: dict[str, str] = {}
    if not settings.llm.execution.model:
        missing["llm"] = (
            "no model configured: set KGOT_MODEL (or llm.model / llm.execution.model), or pass "
            "--model to `kgot tools run`"
        )
    if probe:
        problem = _sandbox_problem(settings)
        if problem is not None:
            missing["sandbox"] = problem
    return missing


def _sandbox_problem(settings: Settings) -> str | None:
    from kgot.sandbox import open_sandbox

    sandbox: Any = None
    try:
        sandbox = open_sandbox(settings.sandbox)
    except (SandboxUnavailableError, ConfigError) as error:
        return f"sandbox.kind = {settings.sandbox.kind} cannot run: {error}"
    finally:
        if sandbox is not None:
            sandbox.close()
    return None
