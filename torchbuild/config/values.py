"""Reading torchbuild.yaml with line numbers, and checking each value against its field's kind.

Every bad value is a ConfigError naming where it came from: `torchbuild.yaml:12: git.jobs: ...`,
`environment TORCHBUILD_GIT_JOBS: ...`, `--jobs: ...`.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from pathlib import Path
from typing import Any, Callable, Mapping

from ..errors import ConfigError

CUDA_RE = re.compile(r"^(auto|none|cpu|\d+(\.\d+)?)$")
PYTHON_RE = re.compile(r"^\d+(\.\d+)?$")


def shown_path(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def read_yaml(path: Path, sections: dict[str, type]) -> dict[str, tuple[Any, int]]:
    """Flatten torchbuild.yaml into {"section.key": (value, line)}, rejecting unknown keys."""
    import yaml

    where = shown_path(path)
    try:
        text = path.read_text()
        root = yaml.compose(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else "?"
        raise ConfigError(f"{where}:{line}: YAML syntax error: {exc.problem or exc}",
                          f"fix the line in {where}") from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"{where}: cannot read: {exc}", f"fix or remove {where}") from None
    if root is None:
        return {}
    if not isinstance(root, yaml.MappingNode):
        raise ConfigError(f"{where}:{root.start_mark.line + 1}: the file must be a mapping of sections",
                          f"start {where} with e.g. `source:`")
    constructor = getattr(yaml, "CSafeLoader", yaml.SafeLoader)("")
    out: dict[str, tuple[Any, int]] = {}
    for key_node, section_node in root.value:
        section, line = key_node.value, key_node.start_mark.line + 1
        if section not in sections:
            raise ConfigError(f"{where}:{line}: unknown section '{section}'{_did_you_mean(section, sections)}",
                              f"sections are: {', '.join(sections)}")
        if section_node.tag == "tag:yaml.org,2002:null":
            continue
        if not isinstance(section_node, yaml.MappingNode):
            raise ConfigError(f"{where}:{line}: section '{section}' must be a mapping of keys",
                              f"write it as `{section}:` followed by indented `key: value` lines")
        names = [f.name for f in dataclasses.fields(sections[section])]
        for name_node, value_node in section_node.value:
            name, line = name_node.value, name_node.start_mark.line + 1
            key = f"{section}.{name}"
            if name not in names:
                raise ConfigError(f"{where}:{line}: unknown key '{key}'{_did_you_mean(name, names)}",
                                  f"keys of '{section}': {', '.join(names)}")
            if key in out:
                raise ConfigError(f"{where}:{line}: '{key}' is set twice (first at line {out[key][1]})",
                                  "keep one of them")
            try:
                value = constructor.construct_object(value_node, deep=True)
            except (yaml.YAMLError, RecursionError) as exc:  # a recursive anchor: `env: &a {X: *a}`
                raise ConfigError(f"{where}:{line}: '{key}' cannot be read: {getattr(exc, 'problem', None) or exc}",
                                  "write the value out instead of an alias to itself") from None
            out[key] = (value, line)
    return out


def _did_you_mean(word: str, known: Any) -> str:
    close = difflib.get_close_matches(word, list(known), n=1) or [k for k in known if word and word in k][:1]
    return f" (did you mean '{close[0]}'?)" if close else ""


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def coerce(f: dataclasses.Field[Any], value: Any, where: str, from_text: bool) -> Any:
    """Check and convert one value for field `f`; `from_text` values come from env or flags."""
    kind: str = f.metadata["kind"]
    optional = kind.endswith("?")
    kind = kind.rstrip("?")
    if value is None or (from_text and optional and value in ("", "none", "null")):
        if optional:
            return None
        raise ConfigError(f"{where}: a value is required ({f.metadata['help']})", "give it a value or remove the line")
    return COERCE[kind](f.metadata, kind, value, where, from_text)


def _text(meta: Mapping[str, Any], kind: str, value: Any, where: str, from_text: bool) -> str:
    if not _scalar(value):
        raise ConfigError(f"{where}: expected text, got {_typename(value)}", f"write it as a string ({meta['help']})")
    value = str(value)
    if kind == "choice" and value not in meta["choices"]:
        raise ConfigError(f"{where}: '{value}' is not one of {', '.join(meta['choices'])}", "use one of those")
    if kind == "cuda":
        _check_cuda(value, where)
    return str(value)


def _number(meta: Mapping[str, Any], kind: str, value: Any, where: str, from_text: bool) -> Any:
    number: Any = value
    if from_text and isinstance(value, str):
        try:
            number = int(value) if kind == "int" else float(value)
        except ValueError:
            number = None
    wanted = int if kind == "int" else (int, float)
    if isinstance(number, bool) or not isinstance(number, wanted) or number != number \
            or number in (float("inf"), float("-inf")):  # NaN compares unequal to itself
        raise ConfigError(f"{where}: expected a {'whole ' if kind == 'int' else ''}number, got {value!r}",
                          f"write a number ({meta['help']})")
    if "min" in meta and number < meta["min"]:
        raise ConfigError(f"{where}: must be at least {meta['min']}, got {number}", f"use a value ≥ {meta['min']}")
    if "max" in meta and number > meta["max"]:
        raise ConfigError(f"{where}: must be at most {meta['max']}, got {number}", f"use a value ≤ {meta['max']}")
    return number


def _bool(meta: Mapping[str, Any], kind: str, value: Any, where: str, from_text: bool) -> bool:
    if isinstance(value, bool):
        return value
    if from_text and str(value).lower() in _TRUE | _FALSE:
        return str(value).lower() in _TRUE
    raise ConfigError(f"{where}: expected true or false, got {value!r}", "write true or false")


def _combos(meta: Mapping[str, Any], kind: str, value: Any, where: str, from_text: bool) -> list[str]:
    items = value.split(",") if from_text and isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        raise ConfigError(f"{where}: expected a list of \"PYTHON:CUDA\" strings, got {_typename(value)}",
                          'write e.g. ["3.6:none", "3.12:13.0"]')
    for item in items:
        py, sep, cuda = item.strip().partition(":")
        if not sep or not PYTHON_RE.match(py):
            raise ConfigError(f"{where}: bad pair '{item}'", 'write PYTHON:CUDA, e.g. "3.6:none"')
        _check_cuda(cuda, where)
    return [i.strip() for i in items]


def _list(meta: Mapping[str, Any], kind: str, value: Any, where: str, from_text: bool) -> list[str]:
    items = value.split(",") if from_text and isinstance(value, str) else value
    if not isinstance(items, list) or not all(_scalar(i) for i in items):
        raise ConfigError(f"{where}: expected a list of strings, got {_typename(value)}",
                          "write a YAML list, e.g. [a, b]")
    if kind == "pythons" and any(isinstance(i, float) for i in items):
        raise ConfigError(f"{where}: Python versions must be quoted (YAML reads 3.10 as the number 3.1)",
                          'write them as strings, e.g. ["3.10", "3.12"]')
    items = [str(i).strip() for i in items if str(i).strip()]
    for item in items:
        if kind == "cudas":
            _check_cuda(item, where)
        if kind == "pythons" and not PYTHON_RE.match(item):
            raise ConfigError(f"{where}: bad Python version '{item}'", 'use versions like "3.12" (quoted in YAML)')
    return items


def _dict(meta: Mapping[str, Any], kind: str, value: Any, where: str, from_text: bool) -> dict[str, str]:
    if from_text and isinstance(value, str):
        pairs = [p.split("=", 1) for p in value.split(",") if p.strip()]
        if any(len(p) != 2 for p in pairs):
            raise ConfigError(f"{where}: expected KEY=VALUE pairs separated by commas, got {value!r}",
                              "write it as a=b,c=d")
        value = {k.strip(): v.strip() for k, v in pairs}
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise ConfigError(f"{where}: expected a mapping, got {_typename(value)}", "write `key: value` lines")
    bad = next((k for k, v in value.items() if v is not None and not _scalar(v) and not isinstance(v, bool)), None)
    if bad is not None:
        raise ConfigError(f"{where}: {bad}: expected text, got {_typename(value[bad])}",
                          f"an environment variable holds text: quote it, e.g. {bad}: \"...\"")
    return {k: "" if v is None else str(v) for k, v in value.items()}


COERCE: dict[str, Callable[[Mapping[str, Any], str, Any, str, bool], Any]] = {
    "str": _text, "choice": _text, "cuda": _text, "int": _number, "float": _number, "bool": _bool,
    "combos": _combos, "list": _list, "pythons": _list, "cudas": _list, "dict": _dict}


def _check_cuda(value: str, where: str) -> None:
    if not CUDA_RE.match(value):
        raise ConfigError(f"{where}: bad CUDA version '{value}'",
                          "use a version like 13.0 or 13, or none/cpu (auto: the newest found)")


def _typename(value: Any) -> str:
    names = {dict: "a mapping", list: "a list", bool: "a boolean", type(None): "nothing"}
    return names.get(type(value), type(value).__name__)


def _scalar(value: Any) -> bool:
    return isinstance(value, (str, int, float)) and not isinstance(value, bool)

