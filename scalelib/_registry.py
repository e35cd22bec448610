"""Name lookup shared by the chip and the model registries (``chip(name)``, ``model(name)``)."""

from __future__ import annotations

from ._errors import InvalidValueError, unknown
from ._validate import shown


def lookup(name, *, kind: str, cls: type, table: dict, aliases: dict, key, example: str, what: str, arg: str):
    """The registered `kind` that `name` (a name, an alias or a `cls` instance) stands for.

    `table` maps names to specs, `aliases` normalised names and aliases to names, `key` normalises a
    name; a `cls` instance under a registered name must equal the registered one (`what` says what
    differs: "figures", "fields").
    """
    if isinstance(name, cls):
        registered = table.get(name.name)
        if registered is not None and registered != name:
            raise InvalidValueError(
                f"`{arg}`: this {cls.__name__} is called {name.name!r} but its {what} differ from the registered "
                f"{name.name!r}; give the variant a name of its own: {kind}({name.name!r}).derive('my-{name.name}', ...)"
            )
        return name
    if not isinstance(name, str):
        raise InvalidValueError(f"`{arg}` must be a {kind} name (e.g. {example!r}) or a {cls.__name__}, got {shown(name)}")
    k = key(name)
    if k not in aliases:
        raise unknown(kind, name, table, arg=arg, extra=[a for s in table.values() for a in s.aliases])
    return table[aliases[k]]
