"""Frozen records for syntax nodes, made without ``dataclasses``' per-class code generation.

A frozen slotted dataclass compiles six methods with ``exec`` when its class is made (about
0.6 ms each class); the fifty-odd syntax nodes were a tenth of a short command's start-up.
These records share one set of methods, read from the class's field list, and behave as those
dataclasses did: fields from the annotations (a value after one is its default), positional
``match`` patterns, equality and hashing by type and fields, a repr, no assignment, copying
and pickling by fields. ``fields`` and ``replace`` stand in for ``dataclasses``' functions.
:class:`Mutable` does the same for a plain (assignable, unhashable) dataclass, with ``field``'s
``default_factory``; the records of a short command's path are made this way, so that it does
not import ``dataclasses`` (and ``inspect``) at all.
"""
from __future__ import annotations

from typing import Any, Callable, TypeVar, dataclass_transform


class Factory:
    """A field's default made afresh for each record, as ``field(default_factory=...)``."""

    __slots__ = ("make",)

    def __init__(self, make: Callable[[], Any]) -> None:
        self.make = make


def field(*, default_factory: Callable[[], Any]) -> Any:
    """``x: list = field(default_factory=list)``: as ``dataclasses.field``'s (its one use here)."""
    return Factory(default_factory)


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
class RecordType(type):
    """Makes ``__slots__``, ``__match_args__`` and the field list from a class's annotations.
    ``frozen=False``, a class keyword, tells type checkers that a :class:`Mutable` record (and
    each subclass of one) is not frozen."""

    _fields: tuple[str, ...]
    _defaults: dict[str, Any]
    _setters: tuple[Callable[[Any, Any], None], ...]

    def __new__(mcls, name: str, bases: tuple, ns: dict[str, Any], frozen: bool = True):
        inherited = tuple(f for b in bases for f in getattr(b, "_fields", ()))
        own = tuple(ns.get("__annotations__", {}))
        defaults = {f: ns.pop(f) for f in own if f in ns}  # (a slot and a class value cannot share a name)
        ns["__slots__"] = tuple(ns.get("__slots__", ())) + own
        cls = super().__new__(mcls, name, bases, ns)
        cls._fields = inherited + own
        cls._defaults = {**getattr(cls, "_defaults", {}), **defaults}
        cls._setters = tuple(getattr(cls, f).__set__ for f in cls._fields)  # each field's slot, set directly
        setattr(cls, "__match_args__", cls._fields)  # (match's positional patterns)
        return cls


class _Fields(metaclass=RecordType):
    """What frozen and mutable records share: construction, equality by type and fields, repr."""

    __slots__ = ()
    _fields = ()  # type: tuple[str, ...]  # (not annotations: those would be fields)
    _defaults = {}  # type: dict[str, Any]
    _setters = ()  # type: tuple[Callable[[Any, Any], None], ...]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        setters = self._setters
        if len(args) == len(setters) and not kwargs:  # every field given in order: most records
            for put_field, value in zip(setters, args):
                put_field(self, value)
            return
        fields = self._fields
        if len(args) > len(fields):
            raise TypeError(f"{type(self).__name__}() takes {len(fields)} fields but {len(args)} were given")
        put = object.__setattr__
        for name, value in zip(fields, args):
            put(self, name, value)
        for name in fields[len(args):]:
            if name in kwargs:
                put(self, name, kwargs.pop(name))
            elif name in self._defaults:
                value = self._defaults[name]
                put(self, name, value.make() if type(value) is Factory else value)
            else:
                raise TypeError(f"{type(self).__name__}() is missing the field {name!r}")
        if kwargs:
            raise TypeError(f"{type(self).__name__}() has no field {next(iter(kwargs))!r}")

    def _values(self) -> tuple:
        return tuple(getattr(self, f) for f in self._fields)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()  # type: ignore[attr-defined]

    def __repr__(self) -> str:
        return f"{type(self).__qualname__}({', '.join(f'{f}={getattr(self, f)!r}' for f in self._fields)})"


class Record(_Fields):
    """A frozen record; subclasses declare their fields as annotations."""

    __slots__ = ()

    def __hash__(self) -> int:
        return hash(self._values())

    def __setattr__(self, name: str, value: Any) -> None:
        # dataclasses' error, which callers catch (imported on this mistake only: not every start)
        from dataclasses import FrozenInstanceError

        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        from dataclasses import FrozenInstanceError

        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __reduce__(self):
        return type(self), self._values()


class Mutable(_Fields, frozen=False):
    """A record whose fields may be assigned, as a plain ``@dataclass``: equal by type and fields,
    unhashable, with a ``__dict__`` for other attributes and weak references."""

    __slots__ = ("__dict__", "__weakref__")
    __hash__ = None  # type: ignore[assignment]


R = TypeVar("R", bound=_Fields)


def fields(record: Record | type[Record]) -> tuple[str, ...]:
    """The field names of a record (or record class), in order."""
    return record._fields


def replace(record: R, **changes: Any) -> R:
    """A copy of ``record`` with some fields changed."""
    return type(record)(**{f: changes.pop(f, getattr(record, f)) for f in record._fields}, **changes)
