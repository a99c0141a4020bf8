"""How a service hands a request to the single writer (Engine._submit): the one thing services
take from the engine, so they never import it."""

from collections.abc import Awaitable, Callable
from typing import Any

Submit = Callable[[Any], Awaitable[Any]]
