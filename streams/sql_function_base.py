"""What Spark SQL's built-in functions share: :func:`_strict` applies one as Spark's
``NullIntolerant`` expressions run (NULL in gives NULL out), reading as strings the arguments a
function takes as strings. A module of its own so that each function module can be imported first:
every one imports :mod:`streams.sql_compiler`, which imports them all to register their handlers,
so a name that one function module took from another would not be defined yet when that other was
imported first.
"""
from __future__ import annotations

from streams import sql_values as sv
from streams.sql_compiler import Compiled, value_type


def _strict(args: list[Compiled], body, t=None, string_args=()):
    """A function that is NULL when any argument is; ``string_args`` are read as strings."""
    fns = [a.fn for a in args]

    def f(row):
        vals = []
        for i, g in enumerate(fns):
            v = g(row)
            if v is None:
                return None
            if i in string_args and not isinstance(v, str):
                v = sv.to_str(v, value_type(args[i], v))
            vals.append(v)
        return body(*vals)
    return Compiled(f, t)
