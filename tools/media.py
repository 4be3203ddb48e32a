"""Images through a multimodal chat model, audio through a speech-to-text endpoint.

Both models are optional. Without one, the tools say exactly which setting turns the capability
on, and point at the python tool for what can still be done with the raw file.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from kgot.config import ModelSettings, Settings
from kgot.tools.base import ToolFailure
from kgot.tools.tool_session import ToolSession

VISION_STEP = "inspect_image"
DEFAULT_IMAGE_PROMPT = (
    "Describe this image in detail for someone who cannot see it: every piece of visible text "
    "verbatim, numbers, labels, tables, chart values, people, objects and their positions."
)


async def look_at_image(
    session: ToolSession, path: Path, *, name: str, question: str | None
) -> str:
    """The vision model's answer to ``question`` about the image (a description by default).

    Raises:
        ToolFailure: ``unavailable`` (no vision model), ``corrupt`` (not an image),
            ``network`` (the model endpoint failed).
    """
    picture = await session.convert("image", path, {"name": name})
    meta = picture["meta"]
    summary = f"{name}: {meta['format'] or 'image'}, {meta['width']}×{meta['height']} pixels"
    model = vision_model(session)
    if model is None:
        where = session.sandbox_path(path)
        raise ToolFailure(
            f"{summary}. No vision model is configured, so its content cannot be seen (set "
            "tools.vision_model to a multimodal `provider:name`)"
            + (
                f"; pixel-level analysis is possible with the python tool at {where}"
                if where
                else ""
            ),
            kind="unavailable",
            source_ref=str(path),
        )
    prompt = question.strip() if question and question.strip() else DEFAULT_IMAGE_PROMPT
    answer = await ask_vision(
        model, picture["image_b64"], picture["mime"], prompt, name=name, source_ref=str(path)
    )
    asked = f"Question: {question.strip()}\n" if question and question.strip() else ""
    return f"{summary}\n{asked}Vision model: {answer.strip()}"


async def ask_vision(
    model: Any, image_b64: str, mime: str, prompt: str, *, name: str, source_ref: str
) -> str:
    """One image and one instruction to the vision model; its text answer.

    Raises:
        ToolFailure: ``network`` when the model call fails.
    """
    from langchain_core.messages import HumanMessage

    message = HumanMessage(
        content=[
            {"type": "text", "text": prompt},
            {"type": "image_url", "image_url": {"url": f"data:{mime};base64,{image_b64}"}},
        ]
    )
    try:
        reply = await model.ainvoke([message], config={"metadata": {"kgot_step": VISION_STEP}})
    except Exception as error:
        raise ToolFailure(
            f"the vision model failed on {name}: {type(error).__name__}: {error}; try again or "
            "analyse the file with the python tool",
            kind="network",
            source_ref=source_ref,
        ) from None
    content = reply.content
    return content if isinstance(content, str) else _join_parts(content)


def _join_parts(parts: list[Any]) -> str:
    texts = []
    for part in parts:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict) and part.get("type") == "text":
            texts.append(str(part.get("text", "")))
    return "\n".join(texts)


def vision_model(session: ToolSession) -> Any | None:
    """The run's vision model (built once), or ``None`` when none is configured.

    Raises:
        ToolFailure: ``unavailable`` when the configured model cannot be built.
    """
    ctx = session.ctx
    if ctx.vision_model is not None:
        return ctx.vision_model
    settings = ctx.settings
    if not settings.vision_model:
        return None
    endpoint = _endpoint(ctx.endpoint, settings.vision_base_url, settings.vision_api_key)
    ctx.vision_model = build_chat_model_for(settings.vision_model, endpoint)
    return ctx.vision_model


def _endpoint(
    default: ModelSettings | None, base_url: str | None, api_key: SecretStr | None
) -> ModelSettings:
    """The execution role's connection settings with the tool's own URL and key, when set."""
    settings = default or ModelSettings()
    update: dict[str, Any] = {}
    if base_url:
        update["base_url"] = base_url
    if api_key is not None:
        update["api_key"] = api_key
    return settings.model_copy(update=update) if update else settings


def build_chat_model_for(model: str, endpoint: ModelSettings | None) -> Any:
    """A LangChain chat model for ``provider:name``, on the given endpoint settings.

    Raises:
        ToolFailure: ``unavailable`` when the model cannot be built (missing provider package,
            malformed name).
    """
    from kgot.llm import build_chat_model

    settings = (endpoint or ModelSettings()).model_copy(update={"model": model})
    try:
        return build_chat_model(settings)
    except Exception as error:  # ConfigError, or a provider class refusing the settings
        raise ToolFailure(
            f"the vision model {model!r} cannot be used: {error}", kind="unavailable"
        ) from None


async def transcribe(session: ToolSession, path: Path, *, name: str) -> str:
    """The transcript of an audio file.

    Raises:
        ToolFailure: ``unavailable`` (no transcription model), ``network`` (endpoint failed).
    """
    ctx = session.ctx
    transcriber = ctx.transcriber
    if transcriber is None:
        if not ctx.settings.transcription_model:
            raise ToolFailure(
                f"{name} is audio, and no transcription model is configured (set "
                "tools.transcription_model, e.g. `whisper-1`, served by an OpenAI-compatible "
                "endpoint); without it the audio cannot be read",
                kind="unavailable",
                source_ref=str(path),
            )
        transcriber = _openai_transcriber(session)
    try:
        text = transcriber(path)
        if inspect.isawaitable(text):
            text = await text
    except ToolFailure:
        raise
    except Exception as error:
        raise ToolFailure(
            f"transcribing {name} failed: {type(error).__name__}: {error}",
            kind="network",
            source_ref=str(path),
        ) from None
    transcript = str(text).strip()
    return f"Transcript of {name}:\n{transcript or '(no speech recognised)'}"


def _openai_transcriber(session: ToolSession) -> Any:
    """Transcribe with ``/audio/transcriptions`` of an OpenAI-compatible server."""
    import openai

    settings = session.settings
    endpoint = _endpoint(
        session.ctx.endpoint, settings.transcription_base_url, settings.transcription_api_key
    )
    model = (settings.transcription_model or "").removeprefix("openai:")
    base_url = endpoint.base_url
    api_key = endpoint.api_key.get_secret_value() if endpoint.api_key else None
    client = openai.AsyncOpenAI(
        base_url=base_url,
        api_key=api_key or "not-needed",
        timeout=settings.timeout,
        max_retries=2,  # the SDK retries connection errors, 429 and 5xx only
    )

    async def run(path: Path) -> str:
        try:
            with path.open("rb") as audio:
                result = await client.audio.transcriptions.create(
                    model=model, file=(path.name, audio.read())
                )
        except openai.APIConnectionError:
            raise ToolFailure(
                f"the transcription endpoint {base_url or 'api.openai.com'} is unreachable; "
                "check tools.transcription_base_url",
                kind="network",
                source_ref=str(path),
            ) from None
        except openai.APIStatusError as error:
            raise ToolFailure(
                f"the transcription endpoint refused {path.name} (HTTP {error.status_code}: "
                f"{error.message})",
                kind="network",
                source_ref=str(path),
            ) from None
        return getattr(result, "text", None) or str(result)

    return run


def capability_notes(settings: Settings, *, audio: bool) -> list[str]:
    """What ``kgot tools list`` says about images (and audio) for the reading tools."""
    tools = settings.tools
    execution = settings.llm.execution
    if tools.vision_model:
        where = tools.vision_base_url or execution.base_url or "the provider's default endpoint"
        notes = [f"images: {tools.vision_model} at {where}"]
    else:
        notes = ["images: off — no vision model configured (tools.vision_model)"]
    if audio:
        if tools.transcription_model:
            where = tools.transcription_base_url or execution.base_url or "api.openai.com"
            notes.append(f"audio: {tools.transcription_model} at {where}")
        else:
            notes.append(
                "audio: off — no transcription model configured (tools.transcription_model)"
            )
    return notes
