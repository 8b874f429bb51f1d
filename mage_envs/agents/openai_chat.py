"""An agent answering through any OpenAI-compatible chat endpoint (the ``[api]`` extra: httpx).

:class:`OpenAIChatAgent` has the harness's ``act_batch``: the prompts of all meta-episodes
in flight go out concurrently (at most ``concurrency`` requests at once), each as one
user message of a ``POST {base_url}/chat/completions``; the caller writes no asyncio.
A request that times out, cannot connect, is answered 429 or 5xx, or comes back without
a readable answer is retried ``retries`` times with exponential backoff and jitter
(a ``Retry-After`` header is honoured); then :class:`APIError` names the URL and the
last failure. The API key is read from the environment variable ``api_key_env`` when a
request is sent and is never stored.

Example (a port with nothing listening: the error names the URL and the cause):
    >>> agent = OpenAIChatAgent("some-model", base_url="http://127.0.0.1:9/v1", retries=1, backoff=0.01)
    >>> try:
    ...     agent("Legal actions: check, bet", {"phase": "act"})
    ... except APIError as error:
    ...     print(error)  # doctest: +ELLIPSIS
    POST http://127.0.0.1:9/v1/chat/completions failed after 2 attempts: ... (ConnectError)
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import email.utils
import os
import random
import time
from collections.abc import Coroutine, Sequence
from typing import Any, TypeVar

from .prompting import INSTRUCTIONS, with_instructions

T = TypeVar("T")

#: HTTP statuses worth another try: rate limited, request timeout, conflict, server errors.
RETRY_STATUSES = frozenset({408, 409, 429}) | frozenset(range(500, 600))


class APIError(RuntimeError):
    """A chat request that failed for good; ``status`` is the last HTTP status (if any)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class _Retryable(Exception):
    """One failed attempt worth retrying, with the server's ``Retry-After`` (seconds) if any."""

    def __init__(self, message: str, status: int | None = None, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


class OpenAIChatAgent:
    """An agent backed by an OpenAI-compatible ``/chat/completions`` endpoint.

    Args:
        model: the model name the server serves (``GET {base_url}/models`` lists them).
        base_url: the API root, ending in ``/v1`` for OpenAI, vLLM and ``transformers serve``.
        api_key_env: environment variable holding the API key; when it is unset no
            ``Authorization`` header is sent (local servers need none).
        temperature, max_tokens, stop, seed: sent with every request (``stop`` and ``seed``
            only when given).
        timeout: seconds for one request (connect, write, read each).
        retries: further attempts after a retryable failure (see the module docstring).
        backoff: the first retry's delay in seconds; it doubles on each retry, up to
            ``max_backoff``, with a random jitter of up to half of it.
        concurrency: requests in flight at most.
        prompting: ``"plain"``, ``"react"`` or ``"reflexion"``: the instructions appended to
            acting prompts (:mod:`mage_envs.agents.prompting`). Reflexion is meant for a
            ``-meta-v0`` env made with ``reflection=True``.
        system_prompt: an optional system message before each prompt.
        name: the agent's name in reports (default ``openai`` or ``openai-<prompting>``).

    After each :meth:`act_batch`, ``last_usage[i]`` is the token usage the server
    reported for answer ``i`` (``None`` when it reported none); the evaluation harness
    writes it to the transcript.
    """

    def __init__(
        self,
        model: str,
        base_url: str = "http://127.0.0.1:8000/v1",
        *,
        api_key_env: str = "OPENAI_API_KEY",
        temperature: float = 0.0,
        max_tokens: int = 256,
        stop: Sequence[str] | None = None,
        seed: int | None = None,
        timeout: float = 60.0,
        retries: int = 4,
        backoff: float = 1.0,
        max_backoff: float = 30.0,
        concurrency: int = 8,
        prompting: str = "plain",
        system_prompt: str | None = None,
        name: str | None = None,
    ) -> None:
        try:
            import httpx  # noqa: F401  (fail here, not at the first request)
        except ImportError as error:
            raise ImportError(f"OpenAIChatAgent needs httpx ({error}): pip install 'mage-rl[api]'") from error

        if prompting not in INSTRUCTIONS:
            raise ValueError(f"unknown prompting {prompting!r}; choose from {', '.join(INSTRUCTIONS)}")
        for label, value in (("max_tokens", max_tokens), ("concurrency", concurrency)):
            if value < 1:
                raise ValueError(f"{label} must be >= 1, got {value}")
        if retries < 0 or timeout <= 0 or backoff < 0:
            raise ValueError(f"need retries >= 0, timeout > 0 and backoff >= 0, got {retries}, {timeout}, {backoff}")
        self.model = model
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.api_key_env = api_key_env
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.stop = list(stop) if stop else None
        self.seed = seed
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.concurrency = concurrency
        self.prompting = prompting
        self.system_prompt = system_prompt
        self.name = name or ("openai" if prompting == "plain" else f"openai-{prompting}")
        self.last_usage: list[dict[str, Any] | None] = []
        self._jitter = random.Random(seed)

    @property
    def settings(self) -> dict[str, Any]:
        """What shapes the answers, checked when a transcript is resumed (not the URL: a
        restarted server may listen elsewhere; never the key)."""
        return {"model": self.model, "temperature": self.temperature, "max_tokens": self.max_tokens,
                "stop": self.stop, "seed": self.seed, "prompting": self.prompting, "system_prompt": self.system_prompt}

    def __call__(self, observation: str, info: dict[str, Any]) -> str:
        return self.act_batch([observation], [info])[0]

    def act_batch(self, observations: list[str], infos: list[dict[str, Any]]) -> list[str]:
        """Answer every prompt (acting or reflecting), ``concurrency`` requests at a time."""
        results = _run(self._complete_all([with_instructions(o, i, self.prompting) for o, i in zip(observations, infos)]))
        self.last_usage = [usage for _, usage in results]
        return [text for text, _ in results]

    def messages(self, prompt: str) -> list[dict[str, str]]:
        """The chat messages sent for ``prompt``."""
        system = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        return [*system, {"role": "user", "content": prompt}]

    async def _complete_all(self, prompts: list[str]) -> list[tuple[str, dict[str, Any] | None]]:
        import httpx

        limit = asyncio.Semaphore(self.concurrency)
        limits = httpx.Limits(max_connections=self.concurrency, max_keepalive_connections=self.concurrency)
        async with httpx.AsyncClient(timeout=self.timeout, limits=limits) as client:

            async def one(prompt: str) -> tuple[str, dict[str, Any] | None]:
                async with limit:
                    return await self._complete(client, prompt)

            tasks = [asyncio.ensure_future(one(p)) for p in prompts]
            try:
                return list(await asyncio.gather(*tasks))
            except BaseException:  # one prompt failed for good: stop the others before the client closes
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                raise

    async def _complete(self, client: Any, prompt: str) -> tuple[str, dict[str, Any] | None]:
        """One prompt's answer and usage, retried on the failures listed in the module docstring."""
        payload: dict[str, Any] = {"model": self.model, "messages": self.messages(prompt),
                                   "temperature": self.temperature, "max_tokens": self.max_tokens}
        if self.stop:
            payload["stop"] = self.stop
        if self.seed is not None:
            payload["seed"] = self.seed
        key = os.environ.get(self.api_key_env)
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        for attempt in range(self.retries + 1):
            try:
                return await self._attempt(client, payload, headers)
            except _Retryable as failure:
                if attempt == self.retries:
                    raise APIError(f"POST {self.url} failed after {attempt + 1} attempts: {failure}",
                                   failure.status) from None
                await asyncio.sleep(self._delay(attempt, failure.retry_after))
        raise AssertionError("unreachable")  # the loop returns or raises

    async def _attempt(self, client: Any, payload: dict[str, Any], headers: dict[str, str]
                       ) -> tuple[str, dict[str, Any] | None]:
        import httpx

        try:
            response = await client.post(self.url, json=payload, headers=headers)
        except httpx.TimeoutException as error:
            raise _Retryable(f"no answer within {self.timeout:g} s ({type(error).__name__})") from None
        except httpx.TransportError as error:
            raise _Retryable(f"{error or 'connection failed'} ({type(error).__name__})") from None
        if response.status_code in RETRY_STATUSES:
            raise _Retryable(f"HTTP {response.status_code}: {_excerpt(response.text)}", response.status_code,
                             _retry_after(response.headers.get("retry-after")))
        if response.status_code >= 400:
            raise APIError(f"POST {self.url} answered HTTP {response.status_code}: {_excerpt(response.text)}",
                           response.status_code)
        try:
            body = response.json()
            content = body["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            raise _Retryable(f"malformed body (expected choices[0].message.content): {_excerpt(response.text)}",
                             response.status_code) from None
        if not isinstance(content, str):
            raise _Retryable(f"malformed body (content is {type(content).__name__}): {_excerpt(response.text)}",
                             response.status_code)
        usage = body.get("usage")
        return content, usage if isinstance(usage, dict) else None

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        """Exponential backoff with jitter; the server's ``Retry-After`` when it asks for longer."""
        base = min(self.max_backoff, self.backoff * 2 ** attempt)
        delay = base * (0.5 + 0.5 * self._jitter.random())
        return min(self.max_backoff, max(delay, retry_after or 0.0))


def _excerpt(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= limit else text[:limit] + "...")


def _retry_after(value: str | None) -> float | None:
    """A ``Retry-After`` header in seconds (delta-seconds or an HTTP date), else ``None``."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _run(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` to completion, also when called from a running event loop (Jupyter)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()
