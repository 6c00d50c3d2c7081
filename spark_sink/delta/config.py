"""The ``DeltaSink`` connector's config (Kafka Connect names, string values) as a sink function.

=================================  ==========  =================================================
name                               default     meaning
=================================  ==========  =================================================
``delta.table.path``               (one of     every record into this one table
``delta.root.path``                 these two) ``<root>/<schema>.<table>`` per source table
``delta.mode``                     ``cdc``     ``cdc`` (Debezium change events) or ``append``
``primary.key.fields``             ""          comma-separated key columns; empty: the record key's
``scd.type``                       ``1``       ``1`` mirror, ``2`` history rows
``delta.app.id``                   ""          application transaction id; empty: from the query id
``value.format``                   ``raw``     ``append`` mode: ``raw`` rows or ``json`` columns
``unavailable.value.placeholder``  Debezium's  the unchanged-TOAST marker (``__debezium_unavailable_value``)
``errors.tolerance``               ``none``    ``all``: poison records go to the ``dlq`` callback
=================================  ==========  =================================================
"""
from __future__ import annotations

import re
from typing import Any, Callable, Mapping

from spark_sink.delta.append import DeltaAppend, delta_append
from spark_sink.delta.apply import DeltaApply, delta_apply
from spark_sink.delta.errors import DeltaConfigError
from spark_sink.delta.schema import DEFAULT_PLACEHOLDER

DEFAULTS = {"delta.table.path": "", "delta.root.path": "", "delta.mode": "cdc", "primary.key.fields": "",
            "scd.type": "1", "delta.app.id": "", "value.format": "raw",
            "unavailable.value.placeholder": DEFAULT_PLACEHOLDER, "errors.tolerance": "none"}


def from_config(config: Mapping[str, Any], *, dlq: Callable | None = None) -> DeltaApply | DeltaAppend:
    """The ``foreachBatch`` function for a ``DeltaSink`` config; keys it does not know are left to
    the runtime (``topics``, ``connector.class``, ``errors.deadletterqueue.*``, ...)."""
    c = {**DEFAULTS, **{k: str(v) for k, v in config.items() if k in DEFAULTS}}
    table_path, root = c["delta.table.path"] or None, c["delta.root.path"] or None
    if (table_path is None) == (root is None):
        raise DeltaConfigError("DeltaSink: set exactly one of delta.table.path and delta.root.path",
                               errors={"delta.table.path": ["set this or delta.root.path"]})
    app_id = c["delta.app.id"] or None
    if c["delta.mode"] == "append":
        if table_path is None:
            raise DeltaConfigError("DeltaSink: delta.mode=append needs delta.table.path",
                                   errors={"delta.table.path": ["required with delta.mode=append"]})
        return delta_append(table_path, value_format=c["value.format"], app_id=app_id,
                            errors_tolerance=c["errors.tolerance"], dlq=dlq)
    if c["delta.mode"] != "cdc":
        raise DeltaConfigError(f"DeltaSink: delta.mode must be cdc or append, not {c['delta.mode']!r}",
                               errors={"delta.mode": ["must be cdc or append"]})
    placeholder = c["unavailable.value.placeholder"]
    if placeholder.startswith("hex:") and not re.fullmatch(r"(?:[0-9a-fA-F]{2})*", placeholder[4:]):
        raise DeltaConfigError(f"DeltaSink: unavailable.value.placeholder={placeholder!r}: after 'hex:' give an even "
                               "number of hexadecimal digits",
                               errors={"unavailable.value.placeholder": ["hex: needs pairs of hexadecimal digits"]})
    keys = [k.strip() for k in c["primary.key.fields"].split(",") if k.strip()] or None
    return delta_apply(root, table_path=table_path, keys=keys, scd_type=c["scd.type"], app_id=app_id,
                       errors_tolerance=c["errors.tolerance"], dlq=dlq,
                       unavailable_value_placeholder=c["unavailable.value.placeholder"])
