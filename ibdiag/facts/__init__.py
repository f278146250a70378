"""Typed data parsed from command output, one module per family of commands.

These are Snapshot fields (``ibdiag.model``) like the sysfs ones: frozen pydantic models that
serialise to JSON and back without loss. They are filled by ``ibdiag.families`` from
the recorded runs, and read by checks and renderers; no one reads command text but the
interpreters.

Conventions every family follows:
- a field is ``None`` when it was not collected (level quick, a command not planned here);
- a reading records the ``role`` of the run it came from (evidence, and how a check finds the
  run to say why it failed) and the ``problems`` its parser had with the text (capped);
- values are what the tool printed, typed (int counters, float Gb/s), never re-derived.
"""

from functools import cache
from typing import Any, Dict, Tuple, Type

from pydantic import BaseModel

from ibdiag.facts._base import Fact


@cache
def fact_fields(model: Type[BaseModel]) -> Tuple[str, ...]:
    """The fields of ``model`` that hold typed command facts (a ``Fact`` in their type); once
    per model (a baseline's every device and port asks)."""

    def holds_fact(annotation: Any) -> bool:
        if isinstance(annotation, type) and issubclass(annotation, Fact):
            return True
        return any(holds_fact(arg) for arg in getattr(annotation, "__args__", ()))

    return tuple(name for name, info in model.model_fields.items() if holds_fact(info.annotation))


def unset_facts(model: Type[BaseModel]) -> Dict[str, Any]:
    """The fact fields of ``model`` as the files alone give them: None, and an empty ``facts``
    map (the families without a named field keep theirs there)."""
    return {name: {} if name == "facts" else None for name in fact_fields(model)}
