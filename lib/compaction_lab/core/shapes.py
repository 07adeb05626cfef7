"""Call shapes: the system prompt and tool definitions an agent sends with every request.

A shape file (``data/shapes/<name>.json``: ``name``, ``description``, ``system_prompt``, ``tools``) is
read here (`CallShape.load`), written here (`write_shape`), and listed here (`shape_files`); `capture`
builds shapes from recorded requests and `verify` locks their fingerprints
(`fingerprints.shape_fingerprint`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from compaction_lab.core import bounded_json, paths
from compaction_lab.core.fingerprints import tools_text
from compaction_lab.core.session import Session

#: A shape name: it becomes a file name, so no separators and no leading dot.
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")

#: File name of the verify lock, which lives beside the shapes and is not one.
LOCK_NAME = "verify.lock.json"


class ShapeError(ValueError):
    """A shape that cannot be captured or written (with the reason)."""


@dataclass(frozen=True)
class CallShape:
    """The production call shape: system prompt and tool definitions sent with every request.

    Parameters
    ----------
    name : str
    system_prompt : str
    tools : tuple of dict
        OpenAI-style tool definitions (``{"type": "function", "function": {...}}``).
    """

    name: str
    system_prompt: str
    tools: tuple[Mapping[str, Any], ...] = ()

    def tools_text(self) -> str:
        """Return the tool definitions as the model sees them, ``""`` without tools.

        This is `fingerprints.tools_text`: what the cost simulator counts too.
        """
        return tools_text(self.tools)

    @classmethod
    def load(cls, path: str | Path) -> CallShape:
        """Read a shape file (``{"name", "system_prompt", "tools"}``)."""
        data = bounded_json.loads(Path(path).read_text(encoding="utf-8"))  # captured or shared: nesting bounded
        return cls(
            name=data.get("name", Path(path).stem),
            system_prompt=data["system_prompt"],
            tools=tuple(data.get("tools") or ()),
        )

    @classmethod
    def default(cls) -> CallShape:
        """Load the synthetic chains' shape (``data/shapes/synthetic-agent.json``)."""
        return cls.load(paths.SHAPES_DIR / "synthetic-agent.json")

    def for_session(self, session: Session) -> CallShape:
        """Return the shape with the session's own recorded system prompt when it has one."""
        own = session.metadata.get("system_prompt")
        if not own:
            first = next((r for r in session.records if r.kind == "system"), None)
            own = first.text if first is not None and first.source_order == 0 else None
        return CallShape(self.name, own, self.tools) if own else self


def plain_json(obj: Any) -> Any:
    """Make a JSON-only deep copy (mappings become dicts, tuples lists)."""
    return json.loads(json.dumps(obj, ensure_ascii=False))


def check_name(name: str) -> str:
    """`name` if it can be a shape file's stem, else a `ShapeError` saying why."""
    if not isinstance(name, str) or not _NAME.match(name) or name.endswith(".json"):
        raise ShapeError(
            f"bad shape name {name!r}: use letters, digits, '.', '_' or '-' (it becomes data/shapes/<name>.json)"
        )
    if f"{name}.json" == LOCK_NAME:
        raise ShapeError(f"bad shape name {name!r}: {LOCK_NAME} is the verify lock")
    return name


def shape_document(call_shape: CallShape, description: str = "") -> dict[str, Any]:
    """Return a shape as its file stores it (``name``, ``description``, ``system_prompt``, ``tools``)."""
    doc: dict[str, Any] = {"name": call_shape.name}
    if description:
        doc["description"] = description
    doc["system_prompt"] = call_shape.system_prompt
    doc["tools"] = [plain_json(t) for t in call_shape.tools]
    return doc


def write_shape(
    call_shape: CallShape, path: str | Path | None = None, *, overwrite: bool = False, description: str = ""
) -> Path:
    """Write a shape file and return its path.

    Parameters
    ----------
    call_shape : CallShape
    path : path, optional
        Default ``data/shapes/<call_shape.name>.json``.
    overwrite : bool
        An existing file is only replaced when True.
    description : str
        Stored beside the call shape (where it came from); not part of the fingerprint.

    Raises
    ------
    ShapeError
        The file exists and `overwrite` is False, or the name is unusable.
    """
    check_name(call_shape.name)
    target = Path(path) if path is not None else paths.SHAPES_DIR / f"{call_shape.name}.json"
    if target.exists() and not overwrite:
        raise ShapeError(f"{target} exists; pass overwrite=True (--force) to replace it")
    target.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(shape_document(call_shape, description), indent=2, ensure_ascii=False) + "\n"
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(target)  # never leave a half-written shape behind
    return target


def shape_files(shapes_dir: str | Path | None = None) -> list[Path]:
    """List the shape files of a folder (``*.json`` but the verify lock), sorted by name."""
    folder = Path(shapes_dir) if shapes_dir is not None else paths.SHAPES_DIR
    return sorted(p for p in folder.glob("*.json") if p.name != LOCK_NAME)


__all__ = [
    "CallShape",
    "LOCK_NAME",
    "ShapeError",
    "check_name",
    "plain_json",
    "shape_document",
    "shape_files",
    "write_shape",
]
