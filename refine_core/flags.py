"""Command-line flags generated from the config dataclasses, so a setting has one name.

Why: `refine run`, `refine experiment` and `refine rl` used to copy their flags by hand from
`RefineConfig`, `ILConfig`, `RLConfig` and `AnalystConfig`, and the copies drifted
(`--rounds` for `max_rounds`, `--allow-weak-sandbox` for `allow_weak_isolation`). Here a
field's flag is its name (`max_rounds` -> `--max-rounds`, with the group's prefix when a
command takes two configs that share names: the analyst's are `--llm-...`), its help is the
field's docstring, its type and default come from the field, and a field may list its
choices in `field(metadata={"choices": ...})`. Every generated flag defaults to None, "not
given", so a command can tell a value the user gave from one it may take elsewhere (a
replayed run's settings); the dataclass's own default applies last.

A dict field of overrides for another config (`RefineConfig.il`, `.rl`) becomes a repeatable
`--<name>-set FIELD=VALUE`, checked against that config's fields. Old spellings users typed
stay as aliases that print a deprecation note when used.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import json
import sys
import textwrap
import types
import typing
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

DEPRECATED = "deprecated_aliases"
"""Attribute of a generated argparse action: the old option strings that still work."""


@cache
def field_docs(cls: type) -> dict[str, str]:
    """Each field's docstring (the string literal under it), whitespace collapsed, through the
    class and its dataclass bases."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass) or klass is object:
            continue
        try:
            source = textwrap.dedent(inspect.getsource(klass))
        except (OSError, TypeError):
            continue
        body = ast.parse(source).body[0].body
        for node, following in zip(body, body[1:], strict=False):
            if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                    and isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant)
                    and isinstance(following.value.value, str)):
                docs[node.target.id] = " ".join(following.value.value.split())
    return docs


def _hint(cls: type, name: str) -> Any:
    """The field's type with `None` taken out of an optional one."""
    hint = typing.get_type_hints(cls)[name]
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        kept = [a for a in typing.get_args(hint) if a is not type(None)]
        hint = kept[0] if len(kept) == 1 else str
    return hint


def flag_name(name: str, prefix: str = "") -> str:
    return f"--{prefix}{name.replace('_', '-')}"


def dest_name(name: str, prefix: str = "") -> str:
    return f"{prefix.replace('-', '_')}{name}"


class _Deprecating:
    """Mixin: say so when an action is reached through one of its deprecated aliases."""

    def _note(self, option_string: str | None) -> None:
        if option_string in getattr(self, DEPRECATED, ()):
            print(f"refine: {option_string} is deprecated; use {self.option_strings[0]}", file=sys.stderr)


class _Store(_Deprecating, argparse._StoreAction):
    def __call__(self, parser, namespace, values, option_string=None):
        self._note(option_string)
        super().__call__(parser, namespace, values, option_string)


class _Bool(_Deprecating, argparse.BooleanOptionalAction):
    def __call__(self, parser, namespace, values, option_string=None):
        self._note(option_string)
        super().__call__(parser, namespace, values, option_string)


class _Pairs(_Deprecating, argparse.Action):
    """KEY=VALUE items (repeatable, several per flag) into one dict; values are JSON where they
    parse as JSON, else text."""

    def __call__(self, parser, namespace, values, option_string=None):
        self._note(option_string)
        found = dict(getattr(namespace, self.dest, None) or {})
        for item in values if isinstance(values, list) else [values]:
            key, sep, text = item.partition("=")
            if not sep or not key:
                parser.error(f"{option_string} {item!r}: expected NAME=VALUE")
            try:
                found[key] = json.loads(text)
            except json.JSONDecodeError:
                found[key] = text
        setattr(namespace, self.dest, found)


def _help(cls: type, field: dataclasses.Field, extra: str = "", old: Iterable[str] = ()) -> str:
    text = field_docs(cls).get(field.name, "")
    if field.default is not dataclasses.MISSING:
        default = field.default
    elif field.default_factory is not dataclasses.MISSING:
        default = field.default_factory()
    else:
        default = dataclasses.MISSING  # required
    shown = "" if default is dataclasses.MISSING else \
        f"(default: {'none' if default is None or default == {} else default})"
    deprecated = f" {', '.join(old)}: the old spelling, deprecated." if old else ""
    return f"{text} {extra}{shown}{deprecated}".replace("%", "%%").strip()


def add_flags(parser: argparse.ArgumentParser | Any, cls: type, *, only: Iterable[str] | None = None,
              exclude: Iterable[str] = (), prefix: str = "", aliases: Mapping[str, Iterable[str]] | None = None,
              settings: Mapping[str, type] | None = None, extra_help: Mapping[str, str] | None = None) -> list[str]:
    """Add a flag for every field of the dataclass `cls` (or those in `only`, minus `exclude`)
    to `parser` (a parser or an argument group); returns the field names it added.

    `aliases`: field -> old option strings still accepted (deprecated). `settings`: dict field
    -> the config class its `--<field>-set FIELD=VALUE` items must name. `extra_help`: field ->
    text put before the default in its help.
    """
    wanted = None if only is None else list(only)
    skip, aliases, settings, extra_help = set(exclude), aliases or {}, settings or {}, extra_help or {}
    by_name = {f.name: f for f in dataclasses.fields(cls)}
    names = [n for n in (wanted if wanted is not None else by_name) if n not in skip]
    for name in names:
        field = by_name[name]
        hint = _hint(cls, name)
        dest = dest_name(name, prefix)
        old = [a for a in aliases.get(name, ())]
        if name in settings:
            target = settings[name]
            flag = flag_name(f"{name}-set", prefix)
            known = ", ".join(f.name for f in dataclasses.fields(target))
            doc = field_docs(cls).get(name, "")
            action = parser.add_argument(flag, *old, dest=dest, action=_Pairs, default=None, metavar="FIELD=VALUE",
                                         help=f"{doc} Repeatable; FIELD is one of {known}.".replace("%", "%%"))
        elif hint is bool:
            action = parser.add_argument(flag_name(name, prefix), *old, dest=dest, action=_Bool, default=None,
                                         help=_help(cls, field, extra_help.get(name, ""), old))
        elif typing.get_origin(hint) is dict or hint is dict:
            action = parser.add_argument(flag_name(name, prefix), *old, dest=dest, action=_Pairs, nargs="+",
                                         default=None, metavar="NAME=VALUE",
                                         help=_help(cls, field, extra_help.get(name, ""), old))
        else:
            nargs, kind = None, hint
            if typing.get_origin(hint) is tuple:
                nargs, kind = "+", typing.get_args(hint)[0]
            if kind not in (int, float, str, Path):
                raise TypeError(f"{cls.__name__}.{name}: no flag for type {hint!r}")
            choices = field.metadata.get("choices")
            required = field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
            action = parser.add_argument(flag_name(name, prefix), *old, dest=dest, action=_Store, default=None,
                                         type=kind, nargs=nargs, choices=choices, required=required,
                                         metavar=None if choices else name.upper(),
                                         help=_help(cls, field, extra_help.get(name, ""), old))
        setattr(action, DEPRECATED, tuple(old))
    return names


def given(args: argparse.Namespace, cls: type, names: Iterable[str] | None = None, *, prefix: str = "") -> dict:
    """{field: value} of the flags `add_flags` made that the command line set (not None);
    tuple fields as tuples."""
    out = {}
    for field in dataclasses.fields(cls):
        if names is not None and field.name not in names:
            continue
        value = getattr(args, dest_name(field.name, prefix), None)
        if value is not None:
            out[field.name] = tuple(value) if isinstance(value, list) else value
    return out


def check_settings(cls: type, values: Mapping[str, Any], flag: str) -> dict:
    """`values` (from a `--<name>-set` flag), refused by name when one is not a field of `cls`."""
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"{flag} {', '.join(unknown)}: not a {cls.__name__} field (fields: {', '.join(sorted(known))})")
    return dict(values)
