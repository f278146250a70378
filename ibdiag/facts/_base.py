"""The base of every typed fact: frozen, strict about keys, built on first use."""

from pydantic import BaseModel, ConfigDict


class Fact(BaseModel):
    """A value parsed from a command's output. Frozen: built once by its interpreter, never
    changed after (``model_copy(update=...)`` makes a changed one). Unknown keys are refused,
    so a corrupt bundle or state file fails loudly instead of losing a field."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)
