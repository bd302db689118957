"""Validate a file's parsed data against a declared schema; one-line errors with file, line, field.

Each kind of file shoal reads declares its fields once, as a ``Table``
beside the code that owns them (inventories in ``shoal.cluster.inventory_file``,
profiles, links and switches in ``shoal.profiles.tables``, stage files in
``shoal.pallex.stagefile``); ``validate`` checks a parsed TOML document
against one and turns the first problem into a ``ShoalError`` such as::

    inv.toml:14: nodes[1].slots: must be a whole number at least 1, got 0

pydantic is imported here and by those tables only, and they only by
commands that read files, so ``shoal --help`` never pays for it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from shoal.errors import ShoalError
from shoal.inputs.tomlpos import line_of

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

T = TypeVar("T")


class Table(BaseModel):
    """A TOML table: types as written (no "3" for 3), finite numbers, no unknown keys."""

    model_config = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False, frozen=True)
    required_hint: ClassVar[str] = ""


Positive = Annotated[float, Field(gt=0)]
NonNegative = Annotated[float, Field(ge=0)]
Text = Annotated[str, Field(min_length=1)]

_KINDS = {"float_type": "a number", "int_type": "a whole number", "string_type": "text",
          "bool_type": "true or false", "dict_type": "a table", "model_type": "a table",
          "list_type": "a list", "tuple_type": "a list", "int_from_float": "a whole number"}
_BOUNDS = {"greater_than": "above {gt}", "greater_than_equal": "at least {ge}",
           "less_than": "below {lt}", "less_than_equal": "at most {le}"}


def read_toml(path: str | Path, what: str, option: str) -> tuple[dict, str]:
    """Parse a TOML file; its text is kept to locate errors. ``what``/``option`` word the errors."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ShoalError(f"cannot read {what} {path}: {exc.strerror}; "
                         f"give an existing TOML file to {option}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ShoalError(f"{path}: not a text file (byte {exc.start} is not UTF-8); "
                         f"give a TOML {what} to {option}") from None
    try:
        return tomllib.loads(text), text
    except tomllib.TOMLDecodeError as exc:
        raise ShoalError(f"{path}: not valid TOML: {exc}; fix the file given to {option}") from None


def validate(model: type[T], data: Any, where: str, text: str = "", at: tuple = ()) -> T:
    """``data`` as an instance of ``model``, or a ShoalError naming file, line and field.

    ``at`` is where ``data`` sits inside the document (e.g. ``("profiles", "nuc")``),
    so lines and field names are those of the whole file.
    """
    from pydantic import ValidationError

    try:
        return model.model_validate(data)  # type: ignore[attr-defined]
    except ValidationError as exc:
        raise _one_line(exc.errors()[0], model, where, text, at) from None


def locate(where: str, text: str, keys: tuple, message: str) -> ShoalError:
    """A 'file:line: field: message' error for a problem found outside a schema."""
    line = line_of(text, keys) if text else None
    place = f"{where}:{line}" if line else where
    return ShoalError(f"{place}: {dotted(keys)}: {message}")


def dotted(keys: tuple) -> str:
    return "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in keys).lstrip(".") or "(top)"


def _one_line(error: dict, model: type, where: str, text: str, at: tuple) -> ShoalError:
    loc = tuple(k for k in error["loc"] if not (isinstance(k, str) and k.startswith("function-")))
    keys = (*at, *loc)
    return locate(where, text, keys, _problem(error, _model_at(model, loc)))


def _model_at(model: Any, loc: tuple) -> Any:
    """The model whose field the last key of ``loc`` is (to list known fields)."""
    import typing

    current = model
    for key in loc[:-1]:
        fields = getattr(current, "model_fields", None)
        if fields is None:
            continue  # a list index or a dict key: the same model goes on
        if key not in fields:
            return current
        annotation = fields[key].annotation
        while typing.get_args(annotation):
            inner = [a for a in typing.get_args(annotation) if hasattr(a, "model_fields")]
            annotation = inner[0] if inner else typing.get_args(annotation)[-1]
        current = annotation if hasattr(annotation, "model_fields") else current
    return current


def _problem(error: dict, model: Any) -> str:
    kind, ctx, got = error["type"], error.get("ctx") or {}, error.get("input")
    fields = sorted(f.alias or name for name, f in getattr(model, "model_fields", {}).items())
    if kind == "missing":
        hint = getattr(model, "required_hint", "")
        return "is missing" + (f"; {hint}" if hint else "")
    if kind == "extra_forbidden":
        return f"unknown field (known: {', '.join(fields)})"
    if kind == "finite_number":
        return f"must be a finite number, got {got!r}"
    if kind in _BOUNDS:
        bound = {k: f"{v:g}" if isinstance(v, (int, float)) else v for k, v in ctx.items()}
        return f"must be {_BOUNDS[kind].format(**bound)}, got {got!r}"
    if kind == "literal_error":
        return f"must be one of {ctx.get('expected', '')}, got {got!r}"
    if kind in ("too_short", "too_long"):
        return f"needs {'at least' if kind == 'too_short' else 'at most'} " \
               f"{ctx.get('min_length', ctx.get('max_length'))} entries"
    if kind in _KINDS:
        return f"must be {_KINDS[kind]}, got {got!r}"
    message = str(error.get("msg", "is invalid"))
    return message.removeprefix("Value error, ").removeprefix("Assertion failed, ")
