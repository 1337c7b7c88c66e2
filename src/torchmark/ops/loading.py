"""Reading a config file (JSON or YAML, same schema) and checking every operator name."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from torchmark.core.bounded_input import (
    brief,
    brief_repr,
    check_nesting,
    load_json,
    read_bytes,
    yaml_loader,
)
from torchmark.core.errors import LimitError, PolicyError
from torchmark.ops.expansion import check_expansion
from torchmark.ops.registry import resolve
from torchmark.ops.schema import BenchmarkConfig, ConfigError, validate_config


class _BadKey(ValueError):
    """A mapping key a config cannot have: repeated, or not a plain value."""


def _unique_keys(pairs: list[tuple[Any, Any]]) -> dict:
    """A JSON object / YAML mapping whose keys are unique: a repeated key (an operator
    listed twice) would otherwise silently replace the first entry."""
    out: dict = {}
    for key, value in pairs:
        if isinstance(key, (list, dict, set)):  # YAML allows `? [a, b]`: no config does
            raise _BadKey(f"a mapping key must be a plain value, got a {type(key).__name__}")
        if key in out:
            raise _BadKey(f"the key {brief_repr(key)} appears twice in one object (the second "
                                "would silently replace the first)")
        out[key] = value
    return out


def _yaml_loader():
    import yaml

    class UniqueKeyLoader(yaml.SafeLoader):  # safe: data only, no Python objects
        def construct_mapping(self, node, deep=False):
            # keys written twice in one mapping are refused; a key written after a `<<:`
            # merge overrides the merged one, as YAML says
            merge = "tag:yaml.org,2002:merge"
            _unique_keys([(self.construct_object(k, deep=deep) if k.tag != merge else "<<",
                           None) for k, _ in node.value])
            self.flatten_mapping(node)
            return {self.construct_object(k, deep=deep): self.construct_object(v, deep=deep)
                    for k, v in node.value}

    UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
                                    UniqueKeyLoader.construct_mapping)
    return yaml_loader(UniqueKeyLoader)  # aliases and nesting bounded


def _parse(path: Path) -> Any:
    data = read_bytes(path, "config")
    try:
        return _parse_text(path, data)
    except _BadKey as e:
        raise ConfigError(str(path), [("", str(e))]) from None


def _parse_text(path: Path, data: bytes) -> Any:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(str(path), [("", "not a text file")]) from None
    what = f"config {brief(str(path))}"
    if path.suffix.lower() in (".yaml", ".yml"):
        import yaml

        try:
            return check_nesting(yaml.load(text, Loader=_yaml_loader()),  # noqa: S506 (safe)
                                 what)
        except LimitError as e:  # raised by the loader: named by the file
            raise LimitError(f"{what}: {e}") from None
        except RecursionError:
            raise LimitError(f"{what}: nested too deep") from None
        except yaml.YAMLError as e:
            where = getattr(e, "problem_mark", None)
            at = f" (line {where.line + 1})" if where is not None else ""
            raise ConfigError(str(path), [("", f"not valid YAML{at}: "
                                               f"{brief(str(getattr(e, 'problem', e)))}")]) \
                from None
    try:
        return load_json(text, what, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as e:
        raise ConfigError(str(path), [("", f"not valid JSON (line {e.lineno}, column "
                                           f"{e.colno}): {e.msg}")]) from None


def check_operators(config: BenchmarkConfig, source: str) -> None:
    problems = []
    for name, entry in config.ops.items():
        try:
            op = resolve(name)
        except (LookupError, PolicyError) as e:
            problems.append((brief(name), str(e.args[0]) if e.args else str(e)))
            continue
        if op.kind != "function":
            continue
        for i, case in enumerate(entry.config):
            if any(spec.args or spec.kwargs for spec in case.build or ()):
                problems.append((f"{name}.config[{i}].build", f"{name} is a function, "
                                 "called with the inputs: it takes no build arguments"))
    if problems:
        raise ConfigError(source, problems)


def config_from_data(data: Any, source: str = "config") -> BenchmarkConfig:
    """Validate an already parsed config (a dict in PARAM's format)."""
    config = validate_config(data, source)
    check_operators(config, source)
    try:
        check_expansion(config)
    except ConfigError as e:  # named by the file, not "config"
        raise ConfigError(source, e.problems) from None
    return config


def load_config(path: str | os.PathLike) -> BenchmarkConfig:
    """Read, validate and resolve a config file; ConfigError lists every problem."""
    path = Path(path)
    return config_from_data(_parse(path), str(path))
